// The built-in rows of each backend's registry (qjoule/kernels/backend_registry.h), one file per backend:
// the CPU's in cpu_backend_formats.cpp, the CUDA one's in kernels/cuda/cuda_backend_formats.cpp (data
// only, built into every build, so that a CPU-only build knows what a GPU would run and says so).
#pragma once

#include <string_view>
#include <vector>

#include "qjoule/kernels/backend_registry.h"

namespace qjoule::kernels::detail {

std::vector<BackendFormat> cpu_builtin_formats();
std::vector<BackendFormat> cuda_builtin_formats();

}  // namespace qjoule::kernels::detail

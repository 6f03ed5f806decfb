// Which kernel a BF16 linear layer runs (see linear_onednn_lowp.h for the order of preference).
// Tests use make_linear_bf16_on to exercise each path the CPU can run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {

enum class Bf16Kernel { automatic, onednn, avx2, scalar };

// Whether oneDNN has a native (non-reference) bf16 matmul on this CPU; false on AVX2-only CPUs.
bool onednn_has_native_bf16_matmul();

// Builds the layer on the requested kernel; fails naming the kernel when this CPU cannot run it.
std::unique_ptr<Linear> make_linear_bf16_on(Bf16Kernel kernel, const float* W, const float* bias, int64_t out,
                                            int64_t in, const std::string& tensor_name);

}  // namespace qjoule::kernels

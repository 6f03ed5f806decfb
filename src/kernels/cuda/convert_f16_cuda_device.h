// The device side of convert_f32_to_f16_cuda, compiled by nvcc. It reports errors as text (empty
// on success) so that nvcc never has to parse fmt; the C++ side turns them into qjoule::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qjoule::kernels::detail {

std::string convert_f32_to_f16_device(const float* in, uint16_t* out, std::size_t n);

}  // namespace qjoule::kernels::detail

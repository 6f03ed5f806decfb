// FP32 → FP16 on the GPU (round to nearest even, ±Inf past 65504, NaN kept): the first step of the
// CUDA FP16 path. Its CPU twin is quant::fp32_to_fp16_bits, which the test compares it with bit for
// bit. Only in builds with the CUDA backend (QJOULE_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qjoule::kernels {

// Copies `in` to the GPU, converts, copies the FP16 bits back to `out`. A CUDA error is a
// qjoule::Error naming the call.
void convert_f32_to_f16_cuda(const float* in, uint16_t* out, std::size_t n);

}  // namespace qjoule::kernels

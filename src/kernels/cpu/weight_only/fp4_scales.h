// The FP4 formats' block scales as the kernels read them (formats.h, "mxfp4 / nvfp4"): one FP32 value per
// stored scale byte, from a 256-entry table built once from the scalar references (quant::e8m0_value,
// quant::e4m3_value), so that every kernel scales by exactly what dequantize_row_*_ref does. NVFP4's
// kernels multiply by s_b · s_t (the tensor's scale folded into the block's: one FP32 rounding that
// the reference, (E2M1 · s_b) · s_t, does not make; within every kernel's error budget).
#pragma once

#include <array>
#include <cstdint>

#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

const std::array<float, 256>& e8m0_values();  // 2^(b − 127); NaN for 255
const std::array<float, 256>& e4m3_values();  // E4M3FN; NaN for 0x7F and 0xFF

// Scale of block b of a row: what its 4-bit codes' table values are multiplied by.
inline float fp4_block_scale(const quant::BlockMxfp4& b, float /*tensor_scale*/) { return e8m0_values()[b.scale_e8m0]; }
inline float fp4_block_scale(const quant::BlockNvfp4& b, float tensor_scale) {
  return e4m3_values()[b.scale_e4m3] * tensor_scale;
}

// The tensor's scale of a packed FP4 matrix (1 for MXFP4, which has none).
inline float fp4_tensor_scale(const quant::Mxfp4Matrix&) { return 1.0f; }
inline float fp4_tensor_scale(const quant::Nvfp4Matrix& w) { return w.tensor_scale; }

}  // namespace qjoule::kernels::detail

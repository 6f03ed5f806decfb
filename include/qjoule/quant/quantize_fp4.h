// The FP4 formats' scalar references (layouts: formats.h, "mxfp4 / nvfp4"): the E2M1, E8M0 and FP8 E4M3
// element conversions, and rows and matrices quantized to MXFP4 and NVFP4 and decoded back. Every
// faster kernel of these formats is tested against these.
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// E2M1 code of a real x (round to nearest, ties to the even mantissa, saturating at ±6); kE2M1Table
// decodes it.
uint8_t e2m1_code(float x);

// FP8 E4M3FN: the bit pattern of x ≥ 0 (round to nearest even, subnormals kept, saturating at 448), and
// the value of a bit pattern (0x7F / 0xFF, its NaNs, decode as NaN; never written by e4m3_bits).
uint8_t e4m3_bits(float x);
float e4m3_value(uint8_t bits);

// E8M0: the scale 2^(bits − 127) (255, its NaN, decodes as NaN).
float e8m0_value(uint8_t bits);

// One row of n weights (any n > 0) into ceil(n / block) blocks, the last possibly partial (its padding
// codes 0); dequantize writes n values. `tensor`/`row` name the row in errors (NaN, ±Inf).
void quantize_row_mxfp4_ref(const float* x, int64_t n, BlockMxfp4* y, std::string_view tensor, int64_t row);
void dequantize_row_mxfp4_ref(const BlockMxfp4* x, int64_t n, float* y);
// NVFP4's rows take the tensor's scale s_t (nvfp4_tensor_scale).
void quantize_row_nvfp4_ref(const float* x, int64_t n, float tensor_scale, BlockNvfp4* y, std::string_view tensor,
                            int64_t row);
void dequantize_row_nvfp4_ref(const BlockNvfp4* x, int64_t n, float tensor_scale, float* y);

// s_t = amax / (6 · 448) over the n values (1 where they are all 0).
float nvfp4_tensor_scale(const float* w, int64_t n);

// Whole matrices [rows, cols], any cols > 0.
Mxfp4Matrix quantize_matrix_mxfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor);
Nvfp4Matrix quantize_matrix_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor);
// With a given tensor scale: a part of a Linear run fused (Q | K | V, gate | up) takes the whole one's.
Nvfp4Matrix quantize_matrix_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor,
                                  float tensor_scale);

}  // namespace qjoule::quant

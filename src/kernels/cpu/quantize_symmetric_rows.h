// Symmetric per-row INT8 quantization shared by the W8A8 kernel and its scalar reference twin.
//
// For a row r with a = max_k |v[r,k]|:
//   inv   = qmax / a                      (one FP32 division)
//   q     = clamp(round_half_even(v · inv), −qmax, qmax)
//   scale = a / qmax                      (dequantized value = q · scale)
// Rows with a < kZeroRowBelow (all zeros, or nothing but denormals) quantize to all-zero codes with
// scale 0: 1/a would overflow FP32 there, and their contribution is below any FP32 output's
// resolution. NaN or Inf anywhere is rejected with a qjoule::Error naming `what` and the row.
// The AVX2 and scalar paths compute exactly the same codes (same two IEEE operations per element),
// which the unit tests check.
#pragma once

#include <cstdint>
#include <string>

#include "qjoule/quant/element_math.h"

namespace qjoule::kernels {

inline constexpr float kZeroRowBelow = element::kZeroRowBelow;

// Weights (or any rows) to s8 codes in [−qmax, qmax]; q is [rows, cols] row-major, scales is [rows].
void quantize_rows_symmetric_s8(const float* v, int64_t rows, int64_t cols, int qmax, int8_t* q, float* scales,
                                const std::string& what);

// Activations per token for oneDNN's u8×s8 GEMM: the s8 code (qmax 127) plus 128, so u8 in [1, 255].
// Uses AVX2 when the CPU has it, the scalar loop otherwise; rows are split over OpenMP threads.
// col_scale [cols] (or nullptr): quantize v[r, k] · col_scale[k] instead (SmoothQuant's 1/s applied at
// run time), the product being one FP32 multiply per element.
void quantize_rows_symmetric_u8_shifted(const float* v, int64_t rows, int64_t cols, uint8_t* q, float* scales,
                                        const std::string& what, const float* col_scale = nullptr);

// The same as above, scalar only (the reference the AVX2 path is tested against).
void quantize_rows_symmetric_u8_shifted_scalar(const float* v, int64_t rows, int64_t cols, uint8_t* q, float* scales,
                                               const std::string& what, const float* col_scale = nullptr);

// One row of the u8×s8 GEMM's int32 accumulators, held in the FP32 output's storage, to FP32 in place:
// row[j] = float(acc[j] − comp[j]) · (sa · sw[j]) + b[j] (comp: the +128 shift's compensation, sa the
// token's scale, sw the channel scales, b the bias). The AVX-512 and AVX2 forms fuse the last multiply-
// add — one rounding fewer than the scalar form — on every column alike, tails included (masked).
using DequantizeRowS32 = void (*)(float* row, int64_t n, float sa, const int32_t* comp, const float* sw,
                                  const float* b);
void dequantize_row_s32_scalar(float* row, int64_t n, float sa, const int32_t* comp, const float* sw, const float* b);
void dequantize_row_s32_avx2(float* row, int64_t n, float sa, const int32_t* comp, const float* sw,
                             const float* b);  // AVX2 + FMA CPUs only
void dequantize_row_s32_avx512(float* row, int64_t n, float sa, const int32_t* comp, const float* sw,
                               const float* b);  // AVX512F CPUs only
DequantizeRowS32 dequantize_row_s32_for_cpu();   // the widest of the three this CPU runs

}  // namespace qjoule::kernels

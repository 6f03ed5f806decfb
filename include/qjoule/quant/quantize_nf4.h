// bitsandbytes NF4 quantization, with and without double quantization (layout: formats.h, "nf4").
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// bitsandbytes' dQuantizeNF4: the code of the table entry nearest to a normalized value x, found by
// comparing x with the midpoints between adjacent sorted table values (x exactly on a midpoint takes
// the lower code).
uint8_t quantize_nf4_code(float x);

// One row of n weights (any n > 0) into ceil(n / 64) blocks, the last possibly partial (formats.h,
// "Any width"); dequantize writes n values. `tensor`/`row` name the row in errors.
void quantize_row_nf4_ref(const float* x, int64_t n, BlockNf4* y, std::string_view tensor, int64_t row);
void dequantize_row_nf4_ref(const BlockNf4* x, int64_t n, float* y);

// Whole matrix [rows, cols], any cols > 0.
Nf4Matrix quantize_matrix_nf4(const float* w, int64_t rows, int64_t cols, std::string_view tensor);
// NF4 codes as quantize_matrix_nf4, then the absmax values double-quantized (formats.h).
Nf4DqMatrix quantize_matrix_nf4_double(const float* w, int64_t rows, int64_t cols, std::string_view tensor);
// Row r of a double-quantized matrix, decoded through the dequantized absmax values: w.cols values.
void dequantize_row_nf4_dq_ref(const Nf4DqMatrix& w, int64_t r, float* y);

}  // namespace qjoule::quant

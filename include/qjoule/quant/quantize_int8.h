// INT8 per-output-channel symmetric quantization (layout: formats.h, "int8 / w8").
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// One row: returns scale = max|x| / 127 and writes q = clamp(round(x / scale), -127, 127) (all 0 when
// the scale is 0). `tensor`/`row` name the row in errors (NaN/Inf).
float quantize_row_int8_ref(const float* x, int64_t n, int8_t* q, std::string_view tensor, int64_t row);
void dequantize_row_int8_ref(const int8_t* q, float scale, int64_t n, float* y);

Int8Matrix quantize_matrix_int8(const float* w, int64_t rows, int64_t cols, std::string_view tensor);

}  // namespace qjoule::quant

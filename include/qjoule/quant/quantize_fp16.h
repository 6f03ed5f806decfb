// FP16 weight storage (layout: formats.h, "fp16").
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// Converts W [rows, cols] to FP16. Rejects NaN/Inf and |w| that would round beyond 65504, naming
// the tensor and index.
Fp16Matrix quantize_matrix_fp16(const float* w, int64_t rows, int64_t cols, std::string_view tensor);
void dequantize_row_fp16_ref(const uint16_t* bits, int64_t n, float* y);

}  // namespace qjoule::quant

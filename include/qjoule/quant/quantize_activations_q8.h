// Run-time INT8 quantization of activations in blocks of 32 for the W4A8 (`int4`, "_s8") kernels
// (layout: formats.h, "q8 activation blocks").
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// One row of n activations (n % 32 == 0) into n / 32 blocks. NaN/Inf stops with an error naming
// `layer` and the row.
void quantize_row_q8_act_ref(const float* x, int64_t n, BlockQ8Act* y, std::string_view layer, int64_t row);

}  // namespace qjoule::quant

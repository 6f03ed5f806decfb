// Run-time INT8 quantization of a product's activation rows into q8 blocks (formats.h, "q8 activation
// blocks") for the int4 W4A8 kernels: AVX2 where the CPU has it, bit-identical to
// quant::quantize_row_q8_act_ref (which also reports a NaN/Inf, naming the layer, row and column).
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

// m rows of K activations (K % 32 == 0, rows K apart) into xq[i * K / 32 + b]; rows quantized in
// parallel when m >= 8.
void quantize_rows_q8_act_avx2(const float* x, int64_t m, int64_t K, quant::BlockQ8Act* xq, std::string_view layer);

}  // namespace qjoule::kernels::detail

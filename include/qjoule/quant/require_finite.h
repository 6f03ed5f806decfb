// The check every quantizer runs first: NaN or ±Inf in a weight stops with one line naming the
// tensor, the [row, col] index, what was found and what was expected.
#pragma once

#include <cstdint>
#include <string_view>

namespace qjoule::quant {

// Throws qjoule::Error when x[0..n) holds a NaN or ±Inf, e.g.
//   "tensor 'encoder.layer.0.attention.q_lin.weight': NaN at [3, 17]; expected finite weights to quantize to nf4"
// `row` is the row x belongs to (its columns are 0..n-1); `format` names what was being built.
void require_finite(const float* x, int64_t n, std::string_view tensor, int64_t row, std::string_view format);

}  // namespace qjoule::quant

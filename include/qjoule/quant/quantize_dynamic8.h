// bitsandbytes' 8-bit blockwise quantization with the signed dynamic map (functional.quantize_blockwise
// with its default code), used by NF4's double quantization (layout: formats.h, "nf4 + double quantization").
#pragma once

#include <cstdint>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// bitsandbytes' dQuantize<0>: binary search of dynamic_map_signed() from the middle entry, then the
// nearer of the two bracketing entries by their FP32 midpoint.
uint8_t quantize_dynamic8_code(float x);

// x[0..n) in blocks of `block_size`: scale[j] = max|x| over block j (FP32), code = quantize_dynamic8_code
// (x · (1 / scale)); a block whose scale is 0 gets the 0.0 entry (code 127). codes: [n], scales:
// [ceil(n / block_size)]. x must be finite.
void quantize_blockwise_dynamic8_ref(const float* x, int64_t n, int64_t block_size, uint8_t* codes, float* scales);

}  // namespace qjoule::quant

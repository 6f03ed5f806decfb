// BF16 (bfloat16: 1 sign, 8 exponent, 7 mantissa bits — the top half of an FP32) conversions.
#pragma once

#include <cstdint>
#include <cstring>

#include "qjoule/quant/element_math.h"

namespace qjoule::kernels {

// FP32 → BF16 bits, round to nearest even; NaN stays a (quiet) NaN, values that round past the
// largest BF16 become ±Inf.
inline uint16_t f32_to_bf16_bits(float f) { return element::f32_to_bf16_bits(f); }
inline float bf16_bits_to_f32(uint16_t h) { return element::bf16_bits_to_f32(h); }
// The FP32 value nearest-even-rounded to BF16 precision (exactly representable as BF16).
inline float round_to_bf16(float f) { return element::round_to_bf16(f); }

}  // namespace qjoule::kernels

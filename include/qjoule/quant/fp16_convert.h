// Scalar IEEE binary16 <-> binary32 conversion, bit-identical to F16C's vcvtps2ph (round to nearest
// even) and vcvtph2ps, for the scalar paths and the quantizers (which must not depend on the CPU).
#pragma once

#include <cstdint>

namespace qjoule::quant {

// Round-to-nearest-even; overflow gives ±Inf, NaN stays NaN (quiet); subnormals are kept.
uint16_t fp32_to_fp16_bits(float value);
// Exact (every binary16 value is a binary32 value).
float fp16_bits_to_fp32(uint16_t bits);

constexpr float kFp16Max = 65504.0f;

}  // namespace qjoule::quant

#include "qjoule/quant/fp16_convert.h"

#include <bit>

namespace qjoule::quant {

uint16_t fp32_to_fp16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exponent = (x >> 23) & 0xFFu;
  uint32_t mantissa = x & 0x7FFFFFu;
  if (exponent == 0xFFu) {  // Inf stays Inf; NaN becomes a quiet NaN keeping the payload's top bits
    if (mantissa == 0) return static_cast<uint16_t>(sign | 0x7C00u);
    return static_cast<uint16_t>(sign | 0x7E00u | (mantissa >> 13));
  }
  const int e = static_cast<int>(exponent) - 127 + 15;  // biased FP16 exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {                // FP16 subnormal (or zero): value = m * 2^-24
    if (e < -10) return sign;  // below half the smallest subnormal: rounds to (signed) zero
    mantissa |= 0x800000u;
    const int shift = 14 - e;  // 14..24
    uint32_t m = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (m & 1u))) ++m;  // may carry into the smallest normal: still right
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry may reach Inf (0x7C00): right
  return static_cast<uint16_t>(sign | h);
}

float fp16_bits_to_fp32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact
    return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace qjoule::quant

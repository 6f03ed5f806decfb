// BF16 (bfloat16: 1 sign, 8 exponent, 7 mantissa bits — the top half of an FP32) conversions.
#pragma once

#include <cstdint>
#include <cstring>

namespace qjoule::kernels {

// FP32 → BF16 bits, round to nearest even; NaN stays a (quiet) NaN, values that round past the
// largest BF16 become ±Inf.
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// The FP32 value nearest-even-rounded to BF16 precision (exactly representable as BF16).
inline float round_to_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }

}  // namespace qjoule::kernels

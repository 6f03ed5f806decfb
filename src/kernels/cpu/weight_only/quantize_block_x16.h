// The 16-bit activation block of the x16 decode GEMVs (int4: gemv_int4_x16_avx512_vnni.cpp, NF4:
// weight_only_gemv_x16_avx512.h): 32 activations, s = max|x| / 32767, q = round-half-even(x / s) (the
// default rounding mode) clamped to ±32767, so |x − s·q| <= s / 2 = 2^-16 of the block's largest value.
#pragma once

#include <immintrin.h>

#include <cfloat>
#include <cstdint>

namespace qjoule::kernels::detail {

struct BlockX16 {
  __m512i q0, q1;  // q of elements 0..15 and 16..31, as int32
  float s;         // the block's scale (0 for a block of zeros, or one whose scale is subnormal)
  __mmask16 bad;   // lanes holding a NaN or ±Inf in either half (nothing a quantized integer stands for)
};

__attribute__((target("avx512f,avx512dq"))) inline BlockX16 quantize_block_x16(const float* x) {
  constexpr int kNotFinite = 0x01 | 0x08 | 0x10 | 0x80;  // vfpclassps: QNaN, +Inf, −Inf, SNaN
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  BlockX16 b;
  b.bad = _mm512_fpclass_ps_mask(v0, kNotFinite) | _mm512_fpclass_ps_mask(v1, kNotFinite);
  b.s = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1))) / 32767.0f;
  float inv = b.s != 0.0f ? 1.0f / b.s : 0.0f;
  if (!(inv <= FLT_MAX)) inv = 0.0f;  // a subnormal scale: its block is as good as zeros
  const __m512 iv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-32767), hi = _mm512_set1_epi32(32767);
  b.q0 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)), lo), hi);
  b.q1 = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v1, iv)), lo), hi);
  return b;
}

// The two INT8 limbs of 16 lanes of q = 256·h + l (h = q >> 8 signed, l = q & 0xFF unsigned): 16 bytes each.
__attribute__((target("avx512f"))) inline void store_x16_limbs(__m512i q, int8_t* h, uint8_t* l) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(h), _mm512_cvtepi32_epi8(_mm512_srai_epi32(q, 8)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(l), _mm512_cvtepi32_epi8(_mm512_and_si512(q, _mm512_set1_epi32(0xFF))));
}

// The negated sums of a block's limbs as two words: −Σl in the low word (Σl <= 32·255), −Σh in the high
// one (|Σh| <= 32·128), for vpmaddwd with the zero point's words (z, 256·z).
__attribute__((target("avx512f"))) inline uint32_t x16_neg_limb_sums(const BlockX16& b) {
  const __m512i byte = _mm512_set1_epi32(0xFF);
  const int32_t h_total =
      _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(b.q0, 8), _mm512_srai_epi32(b.q1, 8)));
  const int32_t l_total =
      _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_and_si512(b.q0, byte), _mm512_and_si512(b.q1, byte)));
  return static_cast<uint32_t>(static_cast<uint16_t>(-l_total)) |
         (static_cast<uint32_t>(static_cast<uint16_t>(-h_total)) << 16);
}

}  // namespace qjoule::kernels::detail

// The decode GEMV (m <= kX16MaxRows) on AVX2 with 16-bit integer activations, for CPUs without AVX-512
// (Zen 2 / Zen 3, Intel client cores before AVX-VNNI) or at the avx2 level: what the AVX512_VNNI x16 GEMVs do, with
// vpmaddwd (int16 pairs into int32, every AVX2 core) in place of vpdpbusd. The activations per 32-block as
// 16-bit integers, s = max|x| / 32767, q = round-half-even(x / s) clamped to ±32767 (the same numbers as
// quantize_block_x16.h: 2^-16 of the block's largest value); the weights' codes become 16-bit integers in
// registers (a format's decoder). Per 32 weights and activation row: two vpmaddwd, one add, one conversion and one
// FMA by the block's scale d_w · s. A lane sums 4 products of weight words |w| <= 8192 (NF4's table; int4 15, E2M1 12,
// w8 128): |Σ| <= 4 · 8192 · 32767 < 2^31, exact; its conversion to FP32 rounds to 2^-24 of it. The table formats
// whose 32-blocks lie side by side (NF4's block of 64, NVFP4's four blocks of 16) decode two 32-blocks at once
// (kPairs: one shift, two ANDs, four vpshufb for 64 weights where one 32-block takes a broadcast, a shift, a blend,
// an AND and two vpshufb) and sum their lanes further in int32 before one conversion (NF4: 8 products a lane,
// 8 · 8192 · 32767 < 2^31; NVFP4: a block of 16's whole sum).
//
// A decoder D provides
//   int64_t D::rows() const; int64_t D::blocks32() const;    // W is [rows, 32 · blocks32 + tail]
//   int64_t D::tail() const;                                 // columns past the last full 32-block (FP32)
//   static int D::element(int j);   // which of a 32-block's weights is int16 lane j (0..31) of lo (j < 16), hi
//   D::Row D::row(int64_t o) const;  // a cursor on row o
//   Row::block(b, __m256i& lo, __m256i& hi)  // the block's 32 weights as int16 integers, lanes as element()
//   static constexpr bool D::kWholeBlockSums;  // a 32-block's whole sum fits int32 (|w| · 32 · 32767 < 2^31:
//                                    // int4, w8, E2M1; not NF4): eight blocks' sums are then reduced into one
//                                    // vector and scaled by Row::scales8(b) (blocks b .. b + 8's scale())
//   static constexpr bool D::kZeroPoints;  // the octets take Row::codes(b, lo, hi) (the words before a zero point)
//                                    // and subtract Row::zeros8(b) (int32 lanes) times the activations' Σ q
//   float Row::scale(b) const;       // what an integer weight of block b is worth, or where D::kHalfScales
//   Row::half_scales(b, float& lo, float& hi)  // the same for lo's and hi's 16 weights (NVFP4's blocks of 16)
//   static constexpr bool D::kPairs; // 32-blocks 2p and 2p + 1 (A, B) decoded together by pair_words: q of whole
//                                    // pairs in pair_element(j)'s order (0..31 A's elements,
//                                    // 32..63 B's); a last odd block keeps element()'s. Then
//   int64_t Row::accumulate_pairs<MR>(q, s, nb32, __m256 (&acc)[MR])  // adds whole pairs from block 0 into acc
//                                    // (lane sums: acc's lanes are summed at the end), returns the block it
//                                    // stopped at
//   float Row::row_scale() const;    // a factor of the whole row's sum (1 where scale() holds it all)
//   float Row::at(k) const;          // W[o, 32 · blocks32 + k] for the tail
// Included by the gemv_*_x16_avx2.cpp files only; every function that touches __m256 carries QJOULE_TARGET_AVX2.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"

namespace qjoule::kernels::avx2 {

constexpr int64_t kX16MaxRows = 4;  // decode rows; larger m runs the format's FP32 kernel

QJOULE_TARGET_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The table formats (NF4: T16 = round(T · 2^13); E2M1: T16 = 2 · T, exact; the AVX-512 x16 GEMV's values,
// weight_only_gemv_x16_avx512.h): a 16-entry table of int16 words as its low and its high bytes, each in both
// 128-bit lanes, looked up by vpshufb.
struct WordTable {
  __m256i low_bytes, high_bytes;
};
QJOULE_TARGET_AVX2 inline WordTable word_table(const int16_t (&words)[16]) {
  alignas(16) uint8_t low[16], high[16];
  for (int c = 0; c < 16; ++c) {
    low[c] = static_cast<uint8_t>(static_cast<uint16_t>(words[c]) & 0xFF);
    high[c] = static_cast<uint8_t>(static_cast<uint16_t>(words[c]) >> 8);
  }
  return {_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(low))),
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(high)))};
}

// A 32-block's 16 code bytes (nibble order: formats.h) as table words: the high nibbles (elements 2j) into lane 0,
// the low ones (2j + 1) into lane 1, both tables' bytes by vpshufb, interleaved into words: lo = bytes 0..7 of
// each lane (elements 0..15), hi = bytes 8..15 (elements 16..31). Lane order: table_element.
QJOULE_TARGET_AVX2 inline void table_words(__m128i bytes, const WordTable& t, __m256i& lo, __m256i& hi) {
  const __m256i v = _mm256_broadcastsi128_si256(bytes);
  const __m256i codes = _mm256_and_si256(_mm256_blend_epi32(_mm256_srli_epi16(v, 4), v, 0xF0), _mm256_set1_epi8(0x0F));
  const __m256i low = _mm256_shuffle_epi8(t.low_bytes, codes), high = _mm256_shuffle_epi8(t.high_bytes, codes);
  lo = _mm256_unpacklo_epi8(low, high);
  hi = _mm256_unpackhi_epi8(low, high);
}
// Which element of the block word j of table_words' (lo, hi) holds.
inline int table_element(int j) {
  const int half = j / 16, lane = (j % 16) / 8, word = j % 8;  // lo / hi, lane, word in lane
  return 16 * half + 2 * word + lane;
}

// The activation rows as the decoder's lanes want them: q[32 b + j] = the int16 of element D::element(j) of
// block b (of a whole pair's element pair_element(j) where D::kPairs: q[64 p + j], j < 64), s[b] its scale (0 for a block of zeros or one whose scale is subnormal), sums[b] its Σ q. The columns
// past the last full block stay FP32, read from x itself.
struct X16Row {
  std::vector<int16_t> q;
  std::vector<float> s;
  std::vector<int32_t> sums;  // Σ q of each block (for the zero points: Σ (u − z)·q = Σ u·q − z·Σ q)
};

// Which of a pair's 64 elements (A's 0..31, B's 32..63) q lane j holds, as pair_words has the words.
inline int pair_element(int j) {
  const int v = j / 16, half = (j % 16) / 8, word = j % 8;
  return 32 * half + 16 * (v / 2) + 2 * word + v % 2;
}

// Quantizes x[0, 32 · nb32) block by block (element: the decoder's lane order; where pairs (D::kPairs), whole pairs
// of blocks in pair_element's); false when a value is NaN or ±Inf.
template <class Element>
QJOULE_TARGET_AVX2 bool quantize_row_x16_avx2(const float* x, int64_t nb32, Element element, bool pairs, int16_t* q,
                                              float* s, int32_t* sums) {
  const int64_t paired = pairs ? 2 * (nb32 / 2) : 0;
  alignas(32) int32_t pair[64];
  __m256 bad = _mm256_setzero_ps();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lo = _mm256_set1_epi32(-32767), hi = _mm256_set1_epi32(32767);
  for (int64_t b = 0; b < nb32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4], amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      const __m256 zeroed = _mm256_mul_ps(v[j], _mm256_setzero_ps());  // NaN exactly where v is NaN or ±Inf
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(zeroed, zeroed, _CMP_UNORD_Q));
      amax = _mm256_max_ps(amax, _mm256_and_ps(v[j], abs_mask));
    }
    const float scale = hmax(amax) / 32767.0f;
    float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    if (!(inv <= FLT_MAX)) inv = 0.0f;  // a subnormal scale: its block is as good as zeros
    alignas(32) int32_t qi[32];
    int32_t sum = 0;
    for (int j = 0; j < 4; ++j) {
      const __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(inv)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(qi + 8 * j), _mm256_min_epi32(_mm256_max_epi32(r, lo), hi));
    }
    for (int j = 0; j < 32; ++j) sum += qi[j];
    if (b < paired) {  // the pair's 64 values once both are in
      std::copy(qi, qi + 32, pair + 32 * (b % 2));
      if (b % 2 == 1) {
        for (int j = 0; j < 64; ++j) q[32 * (b - 1) + j] = static_cast<int16_t>(pair[pair_element(j)]);
      }
    } else {
      for (int j = 0; j < 32; ++j) q[32 * b + j] = static_cast<int16_t>(qi[element(j)]);
    }
    s[b] = scale;
    sums[b] = sum;
  }
  return _mm256_movemask_ps(bad) == 0;
}

// Lane j = the sum of t[j]'s eight lanes (integer: exact while the sums fit, see kWholeBlockSums).
QJOULE_TARGET_AVX2 inline __m256i lane_sums8(const __m256i (&t)[8]) {
  const __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3]));  // 0123|0123
  const __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(t[4], t[5]), _mm256_hadd_epi32(t[6], t[7]));  // 4567|4567
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
}

// Two 32-blocks' 32 code bytes (A's in the low 128-bit lane, B's in the high; nibble order: formats.h) as table
// words: the even elements (high nibbles) and the odd ones (low) each looked up once by both tables' vpshufb, then
// interleaved into words. words[0]: A's elements 0, 2, .. 14 | B's; [1]: 1, 3, .. 15; [2]: 16, 18, .. 30; [3]: 17, .. 31.
QJOULE_TARGET_AVX2 inline void pair_words(__m256i codes, const WordTable& t, __m256i (&words)[4]) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i even = _mm256_and_si256(_mm256_srli_epi16(codes, 4), nibble), odd = _mm256_and_si256(codes, nibble);
  const __m256i even_low = _mm256_shuffle_epi8(t.low_bytes, even), even_high = _mm256_shuffle_epi8(t.high_bytes, even);
  const __m256i odd_low = _mm256_shuffle_epi8(t.low_bytes, odd), odd_high = _mm256_shuffle_epi8(t.high_bytes, odd);
  words[0] = _mm256_unpacklo_epi8(even_low, even_high);
  words[1] = _mm256_unpacklo_epi8(odd_low, odd_high);
  words[2] = _mm256_unpackhi_epi8(even_low, even_high);
  words[3] = _mm256_unpackhi_epi8(odd_low, odd_high);
}
// pair_words against the pair's 64 activation words q: first = [A's elements 0..15 | B's], second = [16..31 | B's],
// each int32 lane the sum of four products.
QJOULE_TARGET_AVX2 inline void pair_sums(const __m256i (&words)[4], const int16_t* q, __m256i& first, __m256i& second) {
  const __m256i* at = reinterpret_cast<const __m256i*>(q);
  first = _mm256_add_epi32(_mm256_madd_epi16(words[0], _mm256_loadu_si256(at)),
                           _mm256_madd_epi16(words[1], _mm256_loadu_si256(at + 1)));
  second = _mm256_add_epi32(_mm256_madd_epi16(words[2], _mm256_loadu_si256(at + 2)),
                            _mm256_madd_epi16(words[3], _mm256_loadu_si256(at + 3)));
}

// y[i, o] for i < MR activation rows (q + i · 32 nb32, s + i · nb32, x + i · ldx for the tail), o in [o0, o1).
template <class Dec, int MR>
QJOULE_TARGET_AVX2 void gemv_x16_rows(const Dec& dec, const int16_t* q, const float* s, const int32_t* sums,
                                      const float* x, int64_t ldx, const float* bias, float* y, int64_t o0,
                                      int64_t o1) {
  const int64_t N = dec.rows(), nb32 = dec.blocks32(), tail = dec.tail();
  for (int64_t o = o0; o < o1; ++o) {
    const auto row = dec.row(o);
    __m256 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
    int64_t b = 0;
    if constexpr (Dec::kWholeBlockSums) {  // eight blocks' int32 sums into one vector: one conversion and FMA
      for (; b + 8 <= nb32; b += 8) {
        const __m256 d = row.scales8(b);
        for (int i = 0; i < MR; ++i) {
          const int16_t* qb = q + i * 32 * nb32 + 32 * b;
          __m256i t[8];
          for (int j = 0; j < 8; ++j) {
            __m256i lo, hi;
            row.codes(b + j, lo, hi);  // before the zero point
            t[j] = _mm256_add_epi32(
                _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 32 * j))),
                _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 32 * j + 16))));
          }
          __m256i total = lane_sums8(t);
          if constexpr (Dec::kZeroPoints) {  // − z · Σ q, block by block
            const __m256i zq = _mm256_mullo_epi32(
                row.zeros8(b), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + i * nb32 + b)));
            total = _mm256_sub_epi32(total, zq);
          }
          acc[i] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_loadu_ps(s + i * nb32 + b)), acc[i]);
        }
      }
    }
    if constexpr (Dec::kPairs) b = row.template accumulate_pairs<MR>(q, s, nb32, acc);
    for (; b < nb32; ++b) {
      __m256i lo, hi;
      row.block(b, lo, hi);
      if constexpr (Dec::kHalfScales) {  // lo and hi each a block of 16 with its own scale
        float d_lo, d_hi;
        row.half_scales(b, d_lo, d_hi);
        for (int i = 0; i < MR; ++i) {
          const int16_t* qb = q + i * 32 * nb32 + 32 * b;
          const float sb = s[i * nb32 + b];
          const __m256i t_lo = _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb)));
          const __m256i t_hi = _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 16)));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t_lo), _mm256_set1_ps(d_lo * sb), acc[i]);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t_hi), _mm256_set1_ps(d_hi * sb), acc[i]);
        }
      } else {
        const float d = row.scale(b);
        for (int i = 0; i < MR; ++i) {
          const int16_t* qb = q + i * 32 * nb32 + 32 * b;
          const __m256i t =
              _mm256_add_epi32(_mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb))),
                               _mm256_madd_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + 16))));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(d * s[i * nb32 + b]), acc[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) {
      float r = hsum(acc[i]) * row.row_scale();
      for (int64_t k = 0; k < tail; ++k) r += row.at(k) * x[i * ldx + 32 * nb32 + k];
      y[i * N + o] = r + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// The whole decode product: false, with y untouched, when x holds a NaN or ±Inf (the caller runs its FP32 kernel,
// as IEEE arithmetic has it). m <= kX16MaxRows; x [m, 32 · blocks32 + tail].
template <class Dec>
bool run_gemv_x16(const Dec& dec, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t N = dec.rows(), nb32 = dec.blocks32(), K = 32 * nb32 + dec.tail();
  if (m <= 0 || N <= 0) return true;
  thread_local X16Row act;  // reused: no allocation per decode step
  act.q.resize(static_cast<std::size_t>(m * 32 * nb32));
  act.s.resize(static_cast<std::size_t>(m * nb32));
  act.sums.resize(static_cast<std::size_t>(m * nb32));
  int16_t* q = act.q.data();
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_row_x16_avx2(x + i * K, nb32, &Dec::element, Dec::kPairs, q + i * 32 * nb32, act.s.data() + i * nb32,
                               act.sums.data() + i * nb32)) {
      return false;
    }
  }
  const int32_t* sums = act.sums.data();
  const int64_t chunks = (N + kDirectOutChunk - 1) / kDirectOutChunk;
  const float* s = act.s.data();
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o0 = c * kDirectOutChunk, o1 = std::min(N, o0 + kDirectOutChunk);
    switch (m) {
      case 1: gemv_x16_rows<Dec, 1>(dec, q, s, sums, x, K, bias, y, o0, o1); break;
      case 2: gemv_x16_rows<Dec, 2>(dec, q, s, sums, x, K, bias, y, o0, o1); break;
      case 3: gemv_x16_rows<Dec, 3>(dec, q, s, sums, x, K, bias, y, o0, o1); break;
      default: gemv_x16_rows<Dec, 4>(dec, q, s, sums, x, K, bias, y, o0, o1); break;
    }
  }
  return true;
}

}  // namespace qjoule::kernels::avx2

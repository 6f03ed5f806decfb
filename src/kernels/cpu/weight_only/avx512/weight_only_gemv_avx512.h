// The AVX-512 GEMVs of the weight-only formats (decode: m <= kGemvMaxRows activation rows), the decoder
// interface and the loops they share with the prefill driver; weight_only_avx512.h (the driver and its
// prefill panels) includes this file and documents both.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/bf16.h"

#define QJOULE_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define QJOULE_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

namespace qjoule::kernels::avx512 {

constexpr int64_t kChunk = 128;        // weights per decoded chunk of a 4-bit row (64 bytes)
constexpr int64_t kGemvMaxRows = 4;    // m up to this: GEMV
constexpr int64_t kGemvOutBlock = 16;  // output rows per OpenMP work item

QJOULE_TARGET_AVX512 inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}

// body(o_begin, o_end) over blocks of kGemvOutBlock of the rows [r_begin, r_end), on the OpenMP threads
// (static schedule: each output row is computed by one thread in a fixed order, so the result does not
// depend on the thread count).
template <class Body>
void for_each_row_block(int64_t r_begin, int64_t r_end, const Body& body) {
  const int64_t blocks = (r_end - r_begin + kGemvOutBlock - 1) / kGemvOutBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t o_begin = r_begin + b * kGemvOutBlock;
    body(o_begin, std::min(r_end, o_begin + kGemvOutBlock));
  }
}

// xp = x with each full 128-chunk in chunk order: xp[128c + 16s + l] = x[128c + 8l + (s ^ 1)]; the tail
// (K % 128) is copied as is. xs[16c + l] = Σ_s xp[128c + 16s + l] (the lane sums a zero point needs).
inline void permute_like_chunks(const float* x, int64_t K, float* xp, float* xs) {
  const int64_t chunks = K / kChunk;
  for (int64_t c = 0; c < chunks; ++c) {
    const float* xc = x + c * kChunk;
    float* pc = xp + c * kChunk;
    for (int s = 0; s < 8; ++s)
      for (int l = 0; l < 16; ++l) pc[16 * s + l] = xc[8 * l + (s ^ 1)];
    if (xs != nullptr) {
      for (int l = 0; l < 16; ++l) {
        float sum = 0.0f;
        for (int s = 0; s < 8; ++s) sum += pc[16 * s + l];
        xs[16 * c + l] = sum;
      }
    }
  }
  std::memcpy(xp + chunks * kChunk, x + chunks * kChunk, sizeof(float) * static_cast<size_t>(K - chunks * kChunk));
}

// Chunk c's products t (two chains per row) into the rows' accumulators: acc += d ⊙ (t0 + t1 − z ⊙ xs_c)
// (xs: the lane sums, [MR][chunks][16]; read only with a zero point, null otherwise).
template <bool kHasZero, int MR>
QJOULE_TARGET_AVX512 inline void add_chunk(const __m512 (&t)[MR][2], __m512 d, __m512 z, const float* xs, int64_t c,
                                           int64_t chunks, __m512 (&acc)[MR]) {
  for (int i = 0; i < MR; ++i) {
    __m512 ti = _mm512_add_ps(t[i][0], t[i][1]);
    if constexpr (kHasZero) ti = _mm512_fnmadd_ps(z, _mm512_loadu_ps(xs + (i * chunks + c) * 16), ti);
    acc[i] = _mm512_fmadd_ps(ti, d, acc[i]);
  }
}

// ---- GEMV, 4-bit formats, FP32 products (avx512) -----------------------------------------------------
// y[i, o] for i < MR, o in [o_begin, o_end); xp/xs: rows i at xp + i·K, xs + i·16·chunks.
template <class Dec, int MR>
QJOULE_TARGET_AVX512 void gemv_nibbles(const Dec& dec, const float* xp, const float* xs, const float* bias, float* y,
                                       int64_t o_begin, int64_t o_end) {
  const int64_t K = dec.cols(), N = dec.rows();
  const int64_t chunks = K / kChunk, Kc = chunks * kChunk;
  const __m512 table = dec.table();
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i codes;
      __m512 d, z;
      row.chunk(c, codes, d, z);
      __asm__("" : "+v"(codes));  // one load of the (usually line-crossing) codes, not one folded into each shift
      __m512 t[MR][2];
      for (int i = 0; i < MR; ++i) t[i][0] = t[i][1] = _mm512_setzero_ps();
      const float* xc = xp + c * kChunk;
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s), table);
        for (int i = 0; i < MR; ++i)
          t[i][s & 1] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xc + i * K + 16 * s), t[i][s & 1]);
      }
      add_chunk<Dec::kHasZero, MR>(t, d, z, xs, c, chunks, acc);
    }
    if (Kc < K) {  // the last K % 128 weights: decoded one by one, natural order
      alignas(64) float wt[kChunk];
      for (int64_t k = Kc; k < K; ++k) wt[k - Kc] = row.at(k);
      for (int64_t k = Kc; k < K; k += 16) {
        const __mmask16 mask = tail_mask(K - k);
        const __m512 w = _mm512_maskz_loadu_ps(mask, wt + (k - Kc));
        for (int i = 0; i < MR; ++i) acc[i] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(mask, xp + i * K + k), acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) y[i * N + o] = _mm512_reduce_add_ps(acc[i]) + (bias != nullptr ? bias[o] : 0.0f);
  }
}

// ---- GEMV, 4-bit formats, BF16 products (avx512_bf16) ------------------------------------------------
// Half the instructions of the FP32 form: per 32 weights one vpsrlw, one vpermw (a 32-entry word table
// holding bf16(T[i & 15]), so the index needs no mask) and one vdpbf16ps into FP32 lanes. The
// activations are rounded to BF16 once per call, in the order the words come out:
//   xb[128c + 32s + j] = bf16(x[128c + 4j + (s ^ 1)]),  s = 0..3, j = 0..31,
// and FP32 lane i of a product sums weights 8i .. 8i + 7 of the chunk, so d, z and xs keep their lanes.
// int4 codes (integers up to 15) are exact in BF16; NF4's table values are rounded to BF16 (2^-9).
QJOULE_TARGET_AVX512_BF16 inline void permute_like_chunks_bf16(const float* x, int64_t K, uint16_t* xb, float* xs) {
  const int64_t chunks = K / kChunk;
  const __m512i lanes = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
  for (int64_t c = 0; c < chunks; ++c) {
    const float* xc = x + c * kChunk;
    for (int s = 0; s < 4; ++s) {  // words j = 0..15 and 16..31 of shift s: x[4j + (s ^ 1)]
      const float* base = xc + (s ^ 1);
      const __m512 lo = _mm512_i32gather_ps(lanes, base, 4);
      const __m512 hi = _mm512_i32gather_ps(lanes, base + 64, 4);
      const __m512bh pair = _mm512_cvtne2ps_pbh(hi, lo);
      _mm512_storeu_si512(xb + c * kChunk + 32 * s, reinterpret_cast<const __m512i&>(pair));
    }
    if (xs != nullptr) {  // lane sums of the BF16-rounded values, as the products see them
      for (int l = 0; l < 16; ++l) {
        float sum = 0.0f;
        for (int e = 0; e < 8; ++e) sum += bf16_bits_to_f32(f32_to_bf16_bits(xc[8 * l + e]));
        xs[16 * c + l] = sum;
      }
    }
  }
  for (int64_t k = chunks * kChunk; k < K; ++k) xb[k] = f32_to_bf16_bits(x[k]);
}

// The 32-word table of bf16(T[i & 15]) from the decoder's 16-float table, built once per call. Held in
// memory, not as an __m512i: it crosses from run_gemm (no AVX-512 target) into the kernels, and a vector
// passed by value across that boundary has no common calling convention.
struct Bf16WordTable {
  alignas(64) uint16_t words[32];
};
template <class Dec>
QJOULE_TARGET_AVX512 inline Bf16WordTable bf16_word_table(const Dec& dec) {
  alignas(64) float t16[16];
  _mm512_store_ps(t16, dec.table());
  Bf16WordTable t;
  for (int i = 0; i < 32; ++i) t.words[i] = f32_to_bf16_bits(t16[i & 15]);
  return t;
}

template <class Dec, int MR>
QJOULE_TARGET_AVX512_BF16 void gemv_nibbles_bf16(const Dec& dec, const Bf16WordTable& words, const uint16_t* xb,
                                                 const float* xs, const float* bias, float* y, int64_t o_begin,
                                                 int64_t o_end) {
  const int64_t K = dec.cols(), N = dec.rows();
  const __m512i table = _mm512_load_si512(words.words);
  const int64_t chunks = K / kChunk, Kc = chunks * kChunk;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i codes;
      __m512 d, z;
      row.chunk(c, codes, d, z);
      __asm__("" : "+v"(codes));  // one load of the codes, not one folded into each shift
      __m512 t[MR][2];
      for (int i = 0; i < MR; ++i) t[i][0] = t[i][1] = _mm512_setzero_ps();
      const uint16_t* xc = xb + c * kChunk;
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m512i w = _mm512_permutexvar_epi16(_mm512_srli_epi16(codes, 4 * s), table);
        for (int i = 0; i < MR; ++i) {
          const __m512i xv = _mm512_loadu_si512(xc + i * K + 32 * s);
          t[i][s & 1] = _mm512_dpbf16_ps(t[i][s & 1], reinterpret_cast<const __m512bh&>(w),
                                         reinterpret_cast<const __m512bh&>(xv));
        }
      }
      add_chunk<Dec::kHasZero, MR>(t, d, z, xs, c, chunks, acc);
    }
    float tail[MR] = {};
    for (int64_t k = Kc; k < K; ++k) {  // the last K % 128 weights, one by one
      const float w = row.at(k);
      for (int i = 0; i < MR; ++i) tail[i] += w * bf16_bits_to_f32(xb[i * K + k]);
    }
    for (int i = 0; i < MR; ++i) {
      y[i * N + o] = _mm512_reduce_add_ps(acc[i]) + tail[i] + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// ---- GEMV, natural-order formats (w8), FP32 products (avx512) ---------------------------------------
// R rows of W at once (R load streams, each activation load shared by the R rows), 16 weights per step
// and row; the row's scale applied once after the reduction. R = 1: the cost is the conversions, and one
// sequential stream per thread suits the prefetchers best (4 rows at once measured no faster).
template <class Dec, int MR, int R>
QJOULE_TARGET_AVX512 void gemv_natural_rows(const Dec& dec, const float* x, const float* bias, float* y, int64_t o) {
  const int64_t K = dec.cols(), N = dec.rows();
  typename Dec::Row rows[R] = {};
  for (int r = 0; r < R; ++r) rows[r] = dec.row(o + r);
  __m512 acc[R][MR];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    __m512 w[R];
    for (int r = 0; r < R; ++r) w[r] = rows[r].load16(k);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * K + k);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(w[r], xv, acc[r][i]);
    }
  }
  if (k < K) {
    const __mmask16 mask = tail_mask(K - k);
    __m512 w[R];
    for (int r = 0; r < R; ++r) w[r] = rows[r].load_masked(k, mask);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * K + k);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(w[r], xv, acc[r][i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const float scale = rows[r].scale();
    for (int i = 0; i < MR; ++i) {
      y[i * N + o + r] = _mm512_reduce_add_ps(acc[r][i]) * scale + (bias != nullptr ? bias[o + r] : 0.0f);
    }
  }
}

template <class Dec, int MR>
QJOULE_TARGET_AVX512 void gemv_natural(const Dec& dec, const float* x, const float* bias, float* y, int64_t o_begin,
                                       int64_t o_end) {
  constexpr int kRowsAtOnce = 1;
  int64_t o = o_begin;
  for (; o + kRowsAtOnce <= o_end; o += kRowsAtOnce) gemv_natural_rows<Dec, MR, kRowsAtOnce>(dec, x, bias, y, o);
  for (; o < o_end; ++o) gemv_natural_rows<Dec, MR, 1>(dec, x, bias, y, o);
}

// ---- GEMV, w8, BF16 products (avx512_bf16) ------------------------------------------------------------
// An int8 weight is w = 16·hi + lo (hi: its top nibble as a signed value, lo: its low nibble, 0..15),
// both terms exact in BF16. Per 64 weights (one 64-byte load, 32 words of two bytes) four vpermw
// lookups (word >> 0, 4, 8, 12 into 32-word tables holding bf16(lo) and bf16(16·hi) of i & 15, so no
// index needs a mask) and four vdpbf16ps: words of shifts 0 and 4 (the even bytes) pair with the even
// activations, shifts 8 and 12 (odd bytes) with the odd ones. Products of BF16 values are exact in FP32;
// the activations are rounded to BF16 once per call, split into even and odd halves per 64-weight chunk:
//   xb[64c + j] = bf16(x[64c + 2j]),  xb[64c + 32 + j] = bf16(x[64c + 2j + 1]),  j = 0..31;
// the last K % 64 in natural order. Cost per 64 bytes: 3 shifts, 4 vpermw, 4 vdpbf16ps (the cost of a
// 4-bit chunk in gemv_nibbles_bf16, which reads memory at the triad bandwidth), where the FP32 form needs
// 4 sign extensions, 4 conversions and 4 FMAs.
constexpr int64_t kByteChunk = 64;

QJOULE_TARGET_AVX512_BF16 inline void split_even_odd_bf16(const float* x, int64_t K, uint16_t* xb) {
  const int64_t chunks = K / kByteChunk;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t c = 0; c < chunks; ++c) {
    const float* xc = x + c * kByteChunk;
    const __m512 v0 = _mm512_loadu_ps(xc), v1 = _mm512_loadu_ps(xc + 16);
    const __m512 v2 = _mm512_loadu_ps(xc + 32), v3 = _mm512_loadu_ps(xc + 48);
    const __m512bh e = _mm512_cvtne2ps_pbh(_mm512_permutex2var_ps(v2, even, v3), _mm512_permutex2var_ps(v0, even, v1));
    const __m512bh o = _mm512_cvtne2ps_pbh(_mm512_permutex2var_ps(v2, odd, v3), _mm512_permutex2var_ps(v0, odd, v1));
    _mm512_storeu_si512(xb + c * kByteChunk, reinterpret_cast<const __m512i&>(e));
    _mm512_storeu_si512(xb + c * kByteChunk + 32, reinterpret_cast<const __m512i&>(o));
  }
  for (int64_t k = chunks * kByteChunk; k < K; ++k) xb[k] = f32_to_bf16_bits(x[k]);
}

// The two 32-word tables, in memory (see Bf16WordTable).
struct W8NibbleTables {
  alignas(64) uint16_t lo[32];
  alignas(64) uint16_t hi[32];
};
inline W8NibbleTables w8_nibble_tables() {
  W8NibbleTables t;
  for (int i = 0; i < 32; ++i) {
    const int u = i & 15;
    t.lo[i] = f32_to_bf16_bits(static_cast<float>(u));
    t.hi[i] = f32_to_bf16_bits(static_cast<float>(16 * (u < 8 ? u : u - 16)));
  }
  return t;
}

template <class Dec, int MR>
QJOULE_TARGET_AVX512_BF16 void gemv_bytes_bf16(const Dec& dec, const W8NibbleTables& tables, const uint16_t* xb,
                                               const float* bias, float* y, int64_t o_begin, int64_t o_end) {
  const int64_t K = dec.cols(), N = dec.rows();
  const int64_t Kc = K - K % kByteChunk;
  const __m512i lo = _mm512_load_si512(tables.lo), hi = _mm512_load_si512(tables.hi);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m512 acc[MR][4];
    for (int i = 0; i < MR; ++i)
      for (int a = 0; a < 4; ++a) acc[i][a] = _mm512_setzero_ps();
    for (int64_t k = 0; k < Kc; k += kByteChunk) {
      __m512i v = row.load64(k);
      __asm__("" : "+v"(v));  // one load of the codes, not one folded into each shift
      __m512i w[4];
      w[0] = _mm512_permutexvar_epi16(v, lo);
      w[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 4), hi);
      w[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), lo);
      w[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 12), hi);
      for (int i = 0; i < MR; ++i) {
        const __m512i xe = _mm512_loadu_si512(xb + i * K + k);
        const __m512i xo = _mm512_loadu_si512(xb + i * K + k + 32);
        for (int a = 0; a < 4; ++a) {
          acc[i][a] = _mm512_dpbf16_ps(acc[i][a], reinterpret_cast<const __m512bh&>(w[a]),
                                       reinterpret_cast<const __m512bh&>(a < 2 ? xe : xo));
        }
      }
    }
    float tail[MR] = {};
    for (int64_t k = Kc; k < K; ++k) {  // the last K % 64 weights, one by one (scaled)
      const float wk = row.at(k);
      for (int i = 0; i < MR; ++i) tail[i] += wk * bf16_bits_to_f32(xb[i * K + k]);
    }
    const float scale = row.scale();
    for (int i = 0; i < MR; ++i) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
      y[i * N + o] = _mm512_reduce_add_ps(sum) * scale + tail[i] + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// gemv(std::integral_constant<int, MR>{}) for mr = 1..4.
template <class Gemv>
void with_rows(int64_t mr, const Gemv& gemv) {
  switch (mr) {
    case 1: gemv(std::integral_constant<int, 1>{}); break;
    case 2: gemv(std::integral_constant<int, 2>{}); break;
    case 3: gemv(std::integral_constant<int, 3>{}); break;
    default: gemv(std::integral_constant<int, 4>{}); break;
  }
}

}  // namespace qjoule::kernels::avx512

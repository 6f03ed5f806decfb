// The table-format decode GEMV on AVX512_VNNI with 16-bit integer activations ("qjoule:avx512_vnni:nf4_x16",
// "...:nf4dq_x16", "...:mxfp4_x16", "...:nvfp4_x16"), for the nibble decoders of gemm_weight_only_avx512.cpp
// and gemm_fp4_avx512.cpp (weight_only_avx512.h states their interface; each also gives
// kX16TableScale). The weights' table values become 16-bit integers, T16[u] = round(T[u] · kX16TableScale):
// NF4 takes 2^13 (|T16| <= 8192, off by at most 2^-14 of the block's absmax, where BF16 keeps 2^-9 of each
// value), E2M1 takes 2 (its values are multiples of 0.5: T16 = 2·T is exact, |T16| <= 12); the
// activations per 32-block as 16-bit integers (quantize_block_x16.h: 2^-16 of the block's largest). Per 32 weights one shift, one vpermw table lookup (as the BF16 GEMV) and one
// vpdpwssd (int16 pairs into int32, full rate where vdpbf16ps runs at half the FMA rate on Intel cores);
// per 128-weight chunk and activation row one conversion and one FMA by d · s / kX16TableScale. A lane sums
// 8 products a chunk: |Σ| <= 8 · 8192 · 32767 < 2^31, exact. The activations take the BF16 GEMV's word
// order (permute_like_chunks_bf16): FP32 lane l of a chunk holds weights 8l .. 8l + 7, activation block
// l / 4, NF4 block l / 8.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_only/quantize_block_x16.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_avx512.h"

#define QJOULE_TARGET_AVX512_VNNI_FMA __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))

namespace qjoule::kernels::avx512 {

constexpr float kNf4X16TableScale = 8192.0f;  // NF4: T16 = round(T · 2^13)
constexpr float kE2M1X16TableScale = 2.0f;    // E2M1: T16 = 2·T, exact

struct Int16WordTable {  // in memory, as Bf16WordTable
  alignas(64) int16_t words[32];
};
template <class Dec>
QJOULE_TARGET_AVX512_VNNI_FMA inline Int16WordTable int16_word_table(const Dec& dec) {
  static_assert(Dec::kX16TableScale == kNf4X16TableScale || Dec::kX16TableScale == kE2M1X16TableScale,
                "the x16 GEMV's sums stay below 2^31 for these two scales (see above)");
  // round-half-even(T · scale): an exact scaling (a power of 2), then the conversion in the default rounding.
  const __m512 scaled = _mm512_mul_ps(dec.table(), _mm512_set1_ps(Dec::kX16TableScale));
  const __m256i t16 = _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(scaled));
  Int16WordTable t;
  _mm512_store_si512(t.words, _mm512_inserti64x4(_mm512_castsi256_si512(t16), t16, 1));
  return t;
}

// One row of K activations: xq (K int16, the word order of permute_like_chunks_bf16; the last K % 128
// in natural order) and xs[16c + l] = s of activation block 4c + l / 4, over table_scale. q is a scratch
// of K int32 (natural order). False when the row holds a NaN or ±Inf.
QJOULE_TARGET_AVX512_VNNI_FMA inline bool quantize_like_chunks_x16(const float* x, int64_t K, int16_t* xq, float* xs,
                                                                   int32_t* q, float table_scale) {
  __mmask16 bad = 0;
  // K: a multiple of 16 (the formats' padded width); a last K % 32 is never read from xq (the FP32 tail).
  const int64_t chunks = K / kChunk, blocks = K / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const detail::BlockX16 block = detail::quantize_block_x16(x + 32 * b);
    bad |= block.bad;
    const float s = block.s;
    _mm512_storeu_si512(q + 32 * b, block.q0);
    _mm512_storeu_si512(q + 32 * b + 16, block.q1);
    if (b / 4 < chunks) {
      for (int l = 0; l < 4; ++l) xs[16 * (b / 4) + 4 * (b % 4) + l] = s * (1.0f / table_scale);
    }
  }
  const __m512i lanes = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int s = 0; s < 4; ++s) {  // words j = 0..15 and 16..31 of shift s: q[4j + (s ^ 1)]
      const int32_t* base = q + c * kChunk + (s ^ 1);
      const __m256i w0 = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(lanes, base, 4));
      const __m256i w1 = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(lanes, base + 64, 4));
      _mm512_storeu_si512(xq + c * kChunk + 32 * s, _mm512_inserti64x4(_mm512_castsi256_si512(w0), w1, 1));
    }
  }
  for (int64_t k = chunks * kChunk; k < K; ++k) xq[k] = static_cast<int16_t>(q[k]);
  return bad == 0;
}

// y[i, o] for i < MR, o in [o_begin, o_end); xq/xs: rows i at xq + i·K, xs + i·16·chunks; x: the FP32
// activations (the last K % 128 weights are multiplied by these, one by one).
template <class Dec, int MR>
QJOULE_TARGET_AVX512_VNNI_FMA void gemv_nibbles_x16(const Dec& dec, const Int16WordTable& words, const int16_t* xq,
                                                    const float* xs, const float* x, const float* bias, float* y,
                                                    int64_t o_begin, int64_t o_end) {
  static_assert(!Dec::kHasZero, "the x16 nibble GEMV serves formats without zero points (nf4)");
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
      __m512i t[MR][2];           // two chains a row: the four vpdpwssd of a chunk do not wait in one line
      for (int i = 0; i < MR; ++i) t[i][0] = t[i][1] = _mm512_setzero_si512();
      const int16_t* xc = xq + c * kChunk;
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m512i w = _mm512_permutexvar_epi16(_mm512_srli_epi16(codes, 4 * s), table);
        for (int i = 0; i < MR; ++i) {
          t[i][s & 1] = _mm512_dpwssd_epi32(t[i][s & 1], w, _mm512_loadu_si512(xc + i * K + 32 * s));
        }
      }
      for (int i = 0; i < MR; ++i) {
        const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(t[i][0], t[i][1]));
        acc[i] = _mm512_fmadd_ps(sum, _mm512_mul_ps(d, _mm512_loadu_ps(xs + (i * chunks + c) * 16)), acc[i]);
      }
    }
    float tail[MR] = {};
    for (int64_t k = Kc; k < K; ++k) {  // the last K % 128 weights, one by one, on the FP32 activations
      const float w = row.at(k);
      for (int i = 0; i < MR; ++i) tail[i] += w * x[i * K + k];
    }
    for (int i = 0; i < MR; ++i) {
      y[i * N + o] = _mm512_reduce_add_ps(acc[i]) + tail[i] + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// The x16 GEMV for m <= kGemvMaxRows rows of x; false, y untouched, when x holds a NaN or ±Inf.
template <class Dec>
bool run_gemv_x16(const Dec& dec, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t N = dec.rows(), K = dec.cols(), chunks = K / kChunk;
  if (m <= 0 || N <= 0) return true;
  thread_local std::vector<int16_t> xq;  // reused: no allocation per decode step
  thread_local std::vector<float> xs;
  thread_local std::vector<int32_t> q;
  xq.resize(static_cast<std::size_t>(m * K));
  xs.resize(static_cast<std::size_t>(m * 16 * chunks));
  q.resize(static_cast<std::size_t>(K));
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_like_chunks_x16(x + i * K, K, xq.data() + i * K, xs.data() + i * 16 * chunks, q.data(),
                                  Dec::kX16TableScale))
      return false;
  }
  const Int16WordTable table = int16_word_table(dec);
  // Pointers taken here: inside the OpenMP threads the thread_local names are each thread's own vectors.
  const int16_t* a = xq.data();
  const float* a_scales = xs.data();
  with_rows(m, [&](auto mr) {
    for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
      gemv_nibbles_x16<Dec, decltype(mr)::value>(dec, table, a, a_scales, x, bias, y, o_begin, o_end);
    });
  });
  return true;
}

}  // namespace qjoule::kernels::avx512

// The AVX-512 driver shared by the weight-only formats (w8, int4, nf4, nf4:dq): a format supplies a
// *decoder*, this file supplies the loops. Included only by the gemm_*_avx512.cpp files; every function
// that touches __m512 carries a target attribute, so the build needs no -march flag (dispatch at run
// time: weight_only_isa()).
//
// Two loop nests, chosen per call by the number of activation rows m, in two variants chosen per layer
// by the ISA level (WeightOnlyIsa::avx512 / avx512_bf16, the template flag kBf16 below):
//  * m <= kGemvMaxRows (decode): a GEMV that streams each packed weight row once, unpacks it in
//    registers and multiplies it into up to 4 activation rows; the threads split the output rows. The
//    aim is the memory bandwidth. 4-bit rows cost one shift, one vpermps and one FP32 FMA per 16
//    weights (avx512), or one shift, one vpermw and one vdpbf16ps per 32 weights (avx512_bf16:
//    activations rounded to BF16, FP32 accumulation, gemv_nibbles_bf16); w8 rows cost one sign
//    extension, one conversion and one FP32 FMA per 16 weights on both levels.
//  * m > kGemvMaxRows (prefill), avx512_bf16: rows of W are dequantized once per call into a BF16 panel
//    (kPanelBytes at most) and oneDNN's native BF16 matmul multiplies the BF16-rounded activations by it
//    (vdpbf16ps / AMX, FP32 accumulation). avx512 (no AVX512_BF16): the caller's AVX2 tiled FP32
//    kernels. The weights stay 4/8-bit in memory; the panel is scratch.
//
// 4-bit decoders ("nibble" formats, Dec::kNibbles = true) provide
//   int64_t rows(), cols();
//   __m512 table() const;                 // T[u] for the 16 codes u (int4: u as float, nf4: kNf4Table)
//   static constexpr bool kHasZero;       // weight = (T[u] − z)·d  (else T[u]·d)
//   Row row(int64_t o) const;
//   Row::chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const
//       codes: the 64 bytes holding weights [128c, 128c + 128) of the row, as 16 dword lanes;
//       d, z: each lane's scale and zero point (lanes 8g..8g+7 hold the weights of 64-weight group g).
//   float Row::at(int64_t k) const        // W[o, k], for the last (cols % 128) weights
// Chunk order: dword lane l holds 8 nibbles = weights 128c + 8l .. 8l + 7 (nibble order, formats.h:
// the first weight of a byte in its high nibble), so `(lanes >> 4s) & 0xF` is weight 128c + 8l + (s ^ 1)
// in lane l. vpermps reads only the low 4 bits of each index, so no mask is needed. The activations
// are permuted the same way once per call (permute_like_chunks); a dot product does not depend on the
// order of its terms, and neither does a matrix product whose K axis is permuted in both operands.
//
// Natural-order decoders (Dec::kNibbles = false: w8) provide
//   Row::load16(k) -> __m512 (16 unscaled weights), Row::load_masked(k, mask16), float Row::scale(),
//   float Row::at(k) (scaled; the panel's last K % 32 weights).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16.h"

#define QJOULE_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define QJOULE_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

namespace qjoule::kernels::avx512 {

constexpr int64_t kChunk = 128;           // weights per decoded chunk of a 4-bit row (64 bytes)
constexpr int64_t kGemvMaxRows = 4;       // m up to this: GEMV
constexpr int64_t kGemvOutBlock = 16;     // output rows per OpenMP work item
constexpr int64_t kPanelBytes = 4 << 20;  // BF16 panel of dequantized weight rows, at most

// The BF16 panel product (weight_only_bf16_panel.cpp): y[:, n0 .. n0 + n) = a · panelᵀ + bias[n0 ..),
// a: [m, k] BF16, panel: [n, k] BF16 (row-major, i.e. oneDNN's "ba"), y with row stride ldy (a
// narrower panel goes through a dense scratch: oneDNN's implementation depends on the stride). A shape
// whose oneDNN implementation is not the one bf16_panel_kernel_path() names is an error, never a
// wrong label.
void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy);
// True where oneDNN has a native (non-reference) BF16 matmul and the CPU has AVX512_BF16: the
// avx512_bf16 level, whose kernel paths end in bf16_panel_kernel_path().
bool bf16_panel_available();
const std::string& bf16_panel_kernel_path();  // "onednn:brg:avx512_core_bf16:bf16bf16f32"

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
        for (int i = 0; i < MR; ++i) t[i][s & 1] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xc + i * K + 16 * s), t[i][s & 1]);
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

// ---- GEMV, natural-order formats (w8) -----------------------------------------------------------------
template <class Dec, int MR>
QJOULE_TARGET_AVX512 void gemv_natural(const Dec& dec, const float* x, const float* bias, float* y, int64_t o_begin,
                                       int64_t o_end) {
  const int64_t K = dec.cols(), N = dec.rows();
  const int64_t K64 = K - K % 64;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m512 acc[MR][4];
    for (int i = 0; i < MR; ++i)
      for (int a = 0; a < 4; ++a) acc[i][a] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K64; k += 64) {
#pragma GCC unroll 4
      for (int a = 0; a < 4; ++a) {
        const __m512 w = row.load16(k + 16 * a);
        for (int i = 0; i < MR; ++i) acc[i][a] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + i * K + k + 16 * a), acc[i][a]);
      }
    }
    for (int64_t k = K64; k < K; k += 16) {
      const __mmask16 mask = tail_mask(K - k);
      const __m512 w = row.load_masked(k, mask);
      for (int i = 0; i < MR; ++i) acc[i][0] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(mask, x + i * K + k), acc[i][0]);
    }
    const float scale = row.scale();
    for (int i = 0; i < MR; ++i) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
      y[i * N + o] = _mm512_reduce_add_ps(sum) * scale + (bias != nullptr ? bias[o] : 0.0f);
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

// ---- Dequantization of weight rows into a BF16 panel (the avx512_bf16 prefill) ------------------------
// panel row j = W[o_begin + j, :] in the FP32 GEMV's order (chunk order for 4-bit formats), rounded to
// BF16 to nearest even.
template <class Dec>
QJOULE_TARGET_AVX512_BF16 void dequantize_rows_bf16(const Dec& dec, int64_t o_begin, int64_t o_end, uint16_t* panel) {
  const int64_t K = dec.cols();
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    uint16_t* out = panel + (o - o_begin) * K;
    int64_t k_done = 0;
    if constexpr (Dec::kNibbles) {
      const __m512 table = dec.table();
      const int64_t chunks = K / kChunk;
      for (int64_t c = 0; c < chunks; ++c) {
        __m512i codes;
        __m512 d, z;
        row.chunk(c, codes, d, z);
#pragma GCC unroll 4
        for (int s = 0; s < 8; s += 2) {
          __m512 w0 = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s), table);
          __m512 w1 = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s + 4), table);
          if constexpr (Dec::kHasZero) {
            w0 = _mm512_sub_ps(w0, z);
            w1 = _mm512_sub_ps(w1, z);
          }
          const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_mul_ps(w1, d), _mm512_mul_ps(w0, d));
          _mm512_storeu_si512(out + c * kChunk + 16 * s, reinterpret_cast<const __m512i&>(pair));
        }
      }
      k_done = chunks * kChunk;
    } else {
      const __m512 scale = _mm512_set1_ps(row.scale());
      for (; k_done + 32 <= K; k_done += 32) {
        const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_mul_ps(row.load16(k_done + 16), scale),
                                                  _mm512_mul_ps(row.load16(k_done), scale));
        _mm512_storeu_si512(out + k_done, reinterpret_cast<const __m512i&>(pair));
      }
    }
    for (int64_t k = k_done; k < K; ++k) out[k] = f32_to_bf16_bits(row.at(k));
  }
}

// a[i] = bf16(x[i]) for `count` values.
QJOULE_TARGET_AVX512_BF16 inline void to_bf16(const float* x, int64_t count, uint16_t* a) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512bh pair = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(a + i, reinterpret_cast<const __m512i&>(pair));
  }
  for (; i < count; ++i) a[i] = f32_to_bf16_bits(x[i]);
}

// Per-thread scratch of the calls below, reused across calls.
struct Scratch {
  std::vector<float> xp, xs;
  std::vector<uint16_t> a, panel;
};
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The whole product y[m, N] = x[m, K] · Wᵀ + bias. kBf16 (the avx512_bf16 level): BF16 GEMV for 4-bit
// formats and the BF16 panel prefill; otherwise FP32 GEMVs, and `fallback` (the AVX2 kernel) runs
// products of more than kGemvMaxRows rows.
template <bool kBf16, class Dec, class Fallback>
void run_gemm(const Dec& dec, const float* bias, const float* x_in, int64_t m, float* y, const Fallback& fallback) {
  const int64_t N = dec.rows(), K = dec.cols(), chunks = K / kChunk;
  if (m <= 0 || N <= 0) return;
  if (m > kGemvMaxRows && !kBf16) {
    fallback();
    return;
  }
  Scratch& s = scratch();
  if (m <= kGemvMaxRows) {
    if constexpr (Dec::kNibbles) {
      float* xs = nullptr;
      if constexpr (Dec::kHasZero) {
        s.xs.resize(static_cast<size_t>(m * 16 * chunks));
        xs = s.xs.data();
      }
      if constexpr (kBf16) {
        s.a.resize(static_cast<size_t>(m * K));
        for (int64_t i = 0; i < m; ++i) {
          permute_like_chunks_bf16(x_in + i * K, K, s.a.data() + i * K, xs != nullptr ? xs + i * 16 * chunks : nullptr);
        }
        const Bf16WordTable table = bf16_word_table(dec);
        with_rows(m, [&](auto mr) {
          for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
            gemv_nibbles_bf16<Dec, decltype(mr)::value>(dec, table, s.a.data(), xs, bias, y, o_begin, o_end);
          });
        });
      } else {
        s.xp.resize(static_cast<size_t>(m * K));
        for (int64_t i = 0; i < m; ++i) {
          permute_like_chunks(x_in + i * K, K, s.xp.data() + i * K, xs != nullptr ? xs + i * 16 * chunks : nullptr);
        }
        with_rows(m, [&](auto mr) {
          for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
            gemv_nibbles<Dec, decltype(mr)::value>(dec, s.xp.data(), xs, bias, y, o_begin, o_end);
          });
        });
      }
    } else {
      with_rows(m, [&](auto mr) {
        for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
          gemv_natural<Dec, decltype(mr)::value>(dec, x_in, bias, y, o_begin, o_end);
        });
      });
    }
    return;
  }
  if constexpr (kBf16) {
    const float* x = x_in;
    if constexpr (Dec::kNibbles) {  // the panel is in chunk order: the activations follow it
      s.xp.resize(static_cast<size_t>(m * K));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m; ++i) permute_like_chunks(x_in + i * K, K, s.xp.data() + i * K, nullptr);
      x = s.xp.data();
    }
    s.a.resize(static_cast<size_t>(m * K));
    to_bf16(x, m * K, s.a.data());
    const int64_t panel_rows = std::max<int64_t>(16, (kPanelBytes / 2 / K) / 16 * 16);
    s.panel.resize(static_cast<size_t>(std::min(N, panel_rows) * K));
    uint16_t* panel = s.panel.data();
    for (int64_t n0 = 0; n0 < N; n0 += panel_rows) {
      const int64_t n = std::min(panel_rows, N - n0);
      for_each_row_block(n0, n0 + n, [&](int64_t o_begin, int64_t o_end) {
        dequantize_rows_bf16(dec, o_begin, o_end, panel + (o_begin - n0) * K);
      });
      bf16_panel_matmul(s.a.data(), m, K, panel, n, bias != nullptr ? bias + n0 : nullptr, y + n0, N);
    }
  }
}

}  // namespace qjoule::kernels::avx512

// The AVX-512 driver shared by the weight-only formats (w8, int4, nf4, nf4:dq): a format supplies a
// *decoder*, this file supplies the loops. Included only by the gemm_*_avx512.cpp files; every function
// that touches __m512 carries a target attribute, so the build needs no -march flag (dispatch at run
// time: weight_only_isa()).
//
// Two loop nests, chosen per call by the number of activation rows m:
//  * m <= kGemvMaxRows (decode): a GEMV that streams each packed weight row once, unpacks it in
//    registers and multiplies it into up to 4 activation rows; the threads split the output rows. The
//    aim is the memory bandwidth. 4-bit rows cost one shift, one vpermps and one FP32 FMA per 16
//    weights, or, where the CPU has AVX512_BF16, one shift, one vpermw and one vdpbf16ps per 32
//    weights (activations rounded to BF16, FP32 accumulation: gemv_nibbles_bf16); w8 rows cost one
//    sign extension, one conversion and one FP32 FMA per 16 weights.
//  * m > kGemvMaxRows (prefill): rows of W are dequantized once per call into a BF16 panel
//    (kPanelBytes at most) and oneDNN's native BF16 matmul multiplies the BF16-rounded activations by it
//    (vdpbf16ps / AMX, FP32 accumulation). Only where this CPU has AVX512_BF16 (or AMX); elsewhere the
//    caller runs the AVX2 tiled FP32 kernels. The weights stay 4/8-bit in memory; the panel is scratch.
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
//   Row::load16(k) -> __m512 (16 unscaled weights), Row::load_masked(k, mask16), float Row::scale().
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"

#define QJOULE_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define QJOULE_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

namespace qjoule::kernels::avx512 {

constexpr int64_t kChunk = 128;         // weights per decoded chunk of a 4-bit row (64 bytes)
constexpr int64_t kGemvMaxRows = 4;     // m up to this: GEMV
constexpr int64_t kGemvOutBlock = 16;   // output rows per OpenMP work item of the GEMV
constexpr int64_t kPanelBytes = 4 << 20;  // BF16 panel of dequantized weight rows, at most

// The BF16 panel product (weight_only_bf16_panel.cpp): y[:, n0 .. n0 + n) = a · panelᵀ + bias[n0 ..),
// a: [m, k] BF16, panel: [n, k] BF16 (row-major, i.e. oneDNN's "ba"), y with row stride ldy.
// Returns oneDNN's implementation name once a product has run ("onednn:brg:avx512_core_bf16").
void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy);
// True where oneDNN has a native (non-reference) BF16 matmul and the CPU has AVX512_BF16: the prefill
// path above runs; the kernel-path suffix names oneDNN's implementation.
bool bf16_panel_available();
const std::string& bf16_panel_kernel_path();  // "onednn:brg:avx512_core_bf16:bf16bf16f32"

QJOULE_TARGET_AVX512 inline float reduce(__m512 v) { return _mm512_reduce_add_ps(v); }

QJOULE_TARGET_AVX512 inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
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

// ---- GEMV, 4-bit formats --------------------------------------------------------------------------
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
      __asm__("" : "+v"(codes));  // one load of the codes, not one per shift (see gemv_nibbles_bf16)
      __m512 t[MR][2];
      for (int i = 0; i < MR; ++i) t[i][0] = t[i][1] = _mm512_setzero_ps();
      const float* xc = xp + c * kChunk;
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        const __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s), table);
        for (int i = 0; i < MR; ++i) t[i][s & 1] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xc + i * K + 16 * s), t[i][s & 1]);
      }
      for (int i = 0; i < MR; ++i) {
        __m512 ti = _mm512_add_ps(t[i][0], t[i][1]);
        if constexpr (Dec::kHasZero) ti = _mm512_fnmadd_ps(z, _mm512_loadu_ps(xs + i * 16 * chunks + 16 * c), ti);
        acc[i] = _mm512_fmadd_ps(ti, d, acc[i]);
      }
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
    for (int i = 0; i < MR; ++i) y[i * N + o] = reduce(acc[i]) + (bias != nullptr ? bias[o] : 0.0f);
  }
}

// ---- GEMV, 4-bit formats, BF16 products (CPUs with AVX512_BF16) ------------------------------------
// Half the instructions of the FP32 form: per 32 weights one vpsrlw, one vpermw (a 32-entry word table
// holding bf16(T[i & 15]), so the index needs no mask) and one vdpbf16ps into FP32 lanes. The
// activations are rounded to BF16 once per call, in the order the words come out:
//   xb[128c + 32s + j] = bf16(x[128c + 4j + (s ^ 1)]),  s = 0..3, j = 0..31,
// and FP32 lane i of a product sums weights 8i .. 8i + 7 of the chunk, so d, z and xs keep their lanes.
// int4 codes (integers up to 15) are exact in BF16; NF4's table values are rounded to BF16 (2^-9).
QJOULE_TARGET_AVX512_BF16 inline void permute_like_chunks_bf16(const float* x, int64_t K, uint16_t* xb, float* xs) {
  const int64_t chunks = K / kChunk;
  for (int64_t c = 0; c < chunks; ++c) {
    const float* xc = x + c * kChunk;
    uint16_t* bc = xb + c * kChunk;
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 32; ++j) bc[32 * s + j] = f32_to_bf16_bits(xc[4 * j + (s ^ 1)]);
    if (xs != nullptr) {
      for (int l = 0; l < 16; ++l) {
        float sum = 0.0f;
        for (int e = 0; e < 8; ++e) sum += bf16_bits_to_f32(f32_to_bf16_bits(xc[8 * l + e]));
        xs[16 * c + l] = sum;
      }
    }
  }
  for (int64_t k = chunks * kChunk; k < K; ++k) xb[k] = f32_to_bf16_bits(x[k]);
}

// The 32-word table of bf16(T[i & 15]) from the decoder's 16-float table.
QJOULE_TARGET_AVX512 inline __m512i bf16_word_table(__m512 table16) {
  alignas(64) float t16[16];
  alignas(64) uint16_t t32[32];
  _mm512_store_ps(t16, table16);
  for (int i = 0; i < 32; ++i) t32[i] = f32_to_bf16_bits(t16[i & 15]);
  return _mm512_load_si512(t32);
}

template <class Dec, int MR>
QJOULE_TARGET_AVX512_BF16 void gemv_nibbles_bf16(const Dec& dec, const uint16_t* xb, const float* xs,
                                                 const float* bias, float* y, int64_t o_begin, int64_t o_end) {
  const int64_t K = dec.cols(), N = dec.rows();
  const int64_t chunks = K / kChunk, Kc = chunks * kChunk;
  const __m512i table = bf16_word_table(dec.table());
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i codes;
      __m512 d, z;
      row.chunk(c, codes, d, z);
      // One load of the (usually line-crossing) codes, not one per shift: GCC would fold the load into
      // each vpsrlw.
      __asm__("" : "+v"(codes));
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
      for (int i = 0; i < MR; ++i) {
        __m512 ti = _mm512_add_ps(t[i][0], t[i][1]);
        if constexpr (Dec::kHasZero) ti = _mm512_fnmadd_ps(z, _mm512_loadu_ps(xs + i * 16 * chunks + 16 * c), ti);
        acc[i] = _mm512_fmadd_ps(ti, d, acc[i]);
      }
    }
    float tail[MR] = {};
    for (int64_t k = Kc; k < K; ++k) {  // the last K % 128 weights, one by one
      const float w = row.at(k);
      for (int i = 0; i < MR; ++i) tail[i] += w * bf16_bits_to_f32(xb[i * K + k]);
    }
    for (int i = 0; i < MR; ++i) y[i * N + o] = reduce(acc[i]) + tail[i] + (bias != nullptr ? bias[o] : 0.0f);
  }
}

template <class Dec>
QJOULE_TARGET_AVX512_BF16 void gemv_block_bf16(int64_t mr, const Dec& dec, const uint16_t* xb, const float* xs,
                                               const float* bias, float* y, int64_t o_begin, int64_t o_end) {
  switch (mr) {
    case 1: gemv_nibbles_bf16<Dec, 1>(dec, xb, xs, bias, y, o_begin, o_end); break;
    case 2: gemv_nibbles_bf16<Dec, 2>(dec, xb, xs, bias, y, o_begin, o_end); break;
    case 3: gemv_nibbles_bf16<Dec, 3>(dec, xb, xs, bias, y, o_begin, o_end); break;
    default: gemv_nibbles_bf16<Dec, 4>(dec, xb, xs, bias, y, o_begin, o_end); break;
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
      y[i * N + o] = reduce(sum) * scale + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template <class Dec>
QJOULE_TARGET_AVX512 void gemv_block(int64_t mr, const Dec& dec, const float* x, const float* xs, const float* bias,
                                     float* y, int64_t o_begin, int64_t o_end) {
  if constexpr (Dec::kNibbles) {
    switch (mr) {
      case 1: gemv_nibbles<Dec, 1>(dec, x, xs, bias, y, o_begin, o_end); break;
      case 2: gemv_nibbles<Dec, 2>(dec, x, xs, bias, y, o_begin, o_end); break;
      case 3: gemv_nibbles<Dec, 3>(dec, x, xs, bias, y, o_begin, o_end); break;
      default: gemv_nibbles<Dec, 4>(dec, x, xs, bias, y, o_begin, o_end); break;
    }
  } else {
    switch (mr) {
      case 1: gemv_natural<Dec, 1>(dec, x, bias, y, o_begin, o_end); break;
      case 2: gemv_natural<Dec, 2>(dec, x, bias, y, o_begin, o_end); break;
      case 3: gemv_natural<Dec, 3>(dec, x, bias, y, o_begin, o_end); break;
      default: gemv_natural<Dec, 4>(dec, x, bias, y, o_begin, o_end); break;
    }
  }
}

// ---- Dequantization of weight rows into a BF16 panel (the prefill path) -----------------------------
// panel row j = W[o_begin + j, :] in the decoder's order (chunk order for 4-bit formats), rounded to
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

// a[i, k] = bf16(x[i, k]) for m rows of K values.
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

// The whole product y[m, N] = x[m, K] · Wᵀ + bias. `fallback` runs it where neither loop nest applies
// (m > kGemvMaxRows without the BF16 panel path). Each output element is computed by one thread in a
// fixed order, so the result does not depend on the thread count.
template <class Dec, class Fallback>
void run_gemm(const Dec& dec, const float* bias, const float* x_in, int64_t m, float* y, Fallback&& fallback) {
  const int64_t N = dec.rows(), K = dec.cols();
  if (m <= 0 || N <= 0) return;
  if (m > kGemvMaxRows && !bf16_panel_available()) {
    fallback();
    return;
  }
  Scratch& s = scratch();
  if constexpr (Dec::kNibbles) {
    if (m <= kGemvMaxRows && bf16_panel_available()) {  // BF16 products (see gemv_nibbles_bf16)
      const int64_t chunks = K / kChunk;
      s.a.resize(static_cast<size_t>(m * K));
      if (Dec::kHasZero) s.xs.resize(static_cast<size_t>(m * 16 * chunks));
      for (int64_t i = 0; i < m; ++i) {
        permute_like_chunks_bf16(x_in + i * K, K, s.a.data() + i * K,
                                 Dec::kHasZero ? s.xs.data() + i * 16 * chunks : nullptr);
      }
      const uint16_t* xb = s.a.data();
      const float* xs = Dec::kHasZero ? s.xs.data() : nullptr;
      const int64_t blocks = (N + kGemvOutBlock - 1) / kGemvOutBlock;
#pragma omp parallel for schedule(static)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t o_begin = b * kGemvOutBlock, o_end = std::min(N, o_begin + kGemvOutBlock);
        gemv_block_bf16(m, dec, xb, xs, bias, y, o_begin, o_end);
      }
      return;
    }
  }
  const float* x = x_in;
  const float* xs = nullptr;
  if constexpr (Dec::kNibbles) {
    s.xp.resize(static_cast<size_t>(m * K));
    const bool sums = Dec::kHasZero && m <= kGemvMaxRows;
    if (sums) s.xs.resize(static_cast<size_t>(m * 16 * (K / kChunk)));
#pragma omp parallel for schedule(static) if (m >= 16)
    for (int64_t i = 0; i < m; ++i) {
      permute_like_chunks(x_in + i * K, K, s.xp.data() + i * K, sums ? s.xs.data() + i * 16 * (K / kChunk) : nullptr);
    }
    x = s.xp.data();
    xs = sums ? s.xs.data() : nullptr;
  }
  if (m <= kGemvMaxRows) {
    const int64_t blocks = (N + kGemvOutBlock - 1) / kGemvOutBlock;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t o_begin = b * kGemvOutBlock, o_end = std::min(N, o_begin + kGemvOutBlock);
      gemv_block(m, dec, x, xs, bias, y, o_begin, o_end);
    }
    return;
  }
  s.a.resize(static_cast<size_t>(m * K));
  to_bf16(x, m * K, s.a.data());
  const int64_t panel_rows = std::max<int64_t>(16, (kPanelBytes / 2 / K) / 16 * 16);
  s.panel.resize(static_cast<size_t>(std::min(N, panel_rows) * K));
  for (int64_t n0 = 0; n0 < N; n0 += panel_rows) {
    const int64_t n = std::min(panel_rows, N - n0);
    const int64_t blocks = (n + kGemvOutBlock - 1) / kGemvOutBlock;
    uint16_t* panel = s.panel.data();
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t o_begin = n0 + b * kGemvOutBlock, o_end = std::min(n0 + n, o_begin + kGemvOutBlock);
      dequantize_rows_bf16(dec, o_begin, o_end, panel + (o_begin - n0) * K);
    }
    bf16_panel_matmul(s.a.data(), m, K, panel, n, bias != nullptr ? bias + n0 : nullptr, y + n0, N);
  }
}

}  // namespace qjoule::kernels::avx512

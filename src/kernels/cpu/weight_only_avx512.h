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
//    extension, one conversion and one FP32 FMA per 16 weights (avx512), or per 64 weights three
//    shifts, four vpermw and four vdpbf16ps on the weight's two nibbles (avx512_bf16: activations
//    rounded to BF16, gemv_bytes_bf16).
//  * m > kGemvMaxRows (prefill), avx512_bf16: rows of W are dequantized once per call into a BF16 panel
//    (kPanelBytes at most) and oneDNN's native BF16 matmul multiplies the BF16-rounded activations by it
//    (vdpbf16ps / AMX, FP32 accumulation), or, where that is not faster than FP32 on this CPU
//    (panel_kind()), into an FP32 panel (kF32PanelBytes) multiplied by the FP32 activations on oneDNN's
//    FP32 matmul. avx512 (no AVX512_BF16): the caller's AVX2 tiled FP32 kernels. The weights stay
//    4/8-bit in memory; the panel is scratch.
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
//   Row::load64(k) -> __m512i (the 64 int8 codes k .. k + 63, raw), Row::load16(k) -> __m512 (16 unscaled
//   weights), Row::load_masked(k, mask16), float Row::scale(),
//   float Row::at(k) (scaled; the panel's last K % 32 weights).
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16.h"

#define QJOULE_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define QJOULE_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))

namespace qjoule::kernels::avx512 {

constexpr int64_t kChunk = 128;                 // weights per decoded chunk of a 4-bit row (64 bytes)
constexpr int64_t kGemvMaxRows = 4;             // m up to this: GEMV
constexpr int64_t kGemvOutBlock = 16;           // output rows per OpenMP work item
constexpr int64_t kPanelBytes = 256 << 10;      // BF16 panel of dequantized weight rows per thread, at most
constexpr int64_t kF32PanelBytes = 1024 << 10;  // FP32 panel: the same rows take twice the bytes; K = 3072 wants more

// The BF16 panel product (weight_only_bf16_panel.cpp): y[:, n0 .. n0 + n) = a · panelᵀ + bias[n0 ..),
// a: [m, k] BF16, panel: [n, k] BF16 (row-major, i.e. oneDNN's "ba"), y with row stride ldy (a
// narrower panel goes through a dense scratch: oneDNN's implementation depends on the stride). A shape
// whose oneDNN implementation is not the one panel_kernel_path() names is an error, never a wrong
// label.
void bf16_panel_matmul(const uint16_t* a, int64_t m, int64_t k, const uint16_t* panel, int64_t n, const float* bias,
                       float* y, int64_t ldy);
// The same product in FP32: a [m, k] FP32, panel [n, k] FP32, on oneDNN's FP32 matmul.
void f32_panel_matmul(const float* a, int64_t m, int64_t k, const float* panel, int64_t n, const float* bias, float* y,
                      int64_t ldy);
// True where oneDNN has a native (non-reference) BF16 matmul and the CPU has AVX512_BF16: the
// avx512_bf16 level.
bool bf16_panel_available();
// Which panel the avx512_bf16 level's prefill multiplies, decided once per process: BF16 where oneDNN's
// BF16 matmul is at least kBf16PanelMinSpeedup times its FP32 matmul on this CPU (AMX, or BF16 dot
// products twice as wide as FP32 FMAs), timed once on a [256 x 1024] x [1024 x 256] product in the
// calling thread; FP32 otherwise (AVX512_BF16 without AMX: oneDNN's BF16 brgemm ran at 0.55x its FP32
// one on a Sapphire Rapids-class Xeon, and dequantizing to FP32 panels made nf4 / int4 / w8 prefill
// 1.5x faster). QJOULE_WEIGHT_ONLY_PANEL=bf16|f32 decides instead (tests, benchmarks).
enum class PanelKind { bf16, f32 };
inline constexpr double kBf16PanelMinSpeedup = 1.15;
PanelKind panel_kind();
// "bf16_panel+onednn:brg:avx512_core_bf16:bf16bf16f32" or "f32_panel+onednn:brg:avx512_core:f32".
const std::string& panel_kernel_path();

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

// The same into an FP32 panel (the FP32 panel prefill: CPUs whose BF16 dot products are no faster than
// FP32 FMAs): panel row j = W[o_begin + j, :] in the same order, unrounded.
template <class Dec>
QJOULE_TARGET_AVX512 void dequantize_rows_f32(const Dec& dec, int64_t o_begin, int64_t o_end, float* panel) {
  const int64_t K = dec.cols();
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    float* out = panel + (o - o_begin) * K;
    int64_t k_done = 0;
    if constexpr (Dec::kNibbles) {
      const __m512 table = dec.table();
      const int64_t chunks = K / kChunk;
      for (int64_t c = 0; c < chunks; ++c) {
        __m512i codes;
        __m512 d, z;
        row.chunk(c, codes, d, z);
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s), table);
          if constexpr (Dec::kHasZero) w = _mm512_sub_ps(w, z);
          _mm512_storeu_ps(out + c * kChunk + 16 * s, _mm512_mul_ps(w, d));
        }
      }
      k_done = chunks * kChunk;
    } else {
      const __m512 scale = _mm512_set1_ps(row.scale());
      for (; k_done + 16 <= K; k_done += 16) _mm512_storeu_ps(out + k_done, _mm512_mul_ps(row.load16(k_done), scale));
    }
    for (int64_t k = k_done; k < K; ++k) out[k] = row.at(k);
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

// A buffer reused across calls that grows when asked for more and never initializes its contents (a
// std::vector that alternates between layer shapes would zero megabytes on every growth).
template <class T>
class ScratchBuffer {
 public:
  T* get(int64_t count) {
    const auto n = static_cast<size_t>(count);
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

// Per-thread scratch of the calls below, reused across calls.
struct Scratch {
  ScratchBuffer<float> xp, xs, panel_f32;
  ScratchBuffer<uint16_t> a, panel;
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
        xs = s.xs.get(m * 16 * chunks);
      }
      if constexpr (kBf16) {
        uint16_t* a = s.a.get(m * K);
        for (int64_t i = 0; i < m; ++i) {
          permute_like_chunks_bf16(x_in + i * K, K, a + i * K, xs != nullptr ? xs + i * 16 * chunks : nullptr);
        }
        const Bf16WordTable table = bf16_word_table(dec);
        with_rows(m, [&](auto mr) {
          for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
            gemv_nibbles_bf16<Dec, decltype(mr)::value>(dec, table, a, xs, bias, y, o_begin, o_end);
          });
        });
      } else {
        float* xp = s.xp.get(m * K);
        for (int64_t i = 0; i < m; ++i) {
          permute_like_chunks(x_in + i * K, K, xp + i * K, xs != nullptr ? xs + i * 16 * chunks : nullptr);
        }
        with_rows(m, [&](auto mr) {
          for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
            gemv_nibbles<Dec, decltype(mr)::value>(dec, xp, xs, bias, y, o_begin, o_end);
          });
        });
      }
    } else if constexpr (kBf16) {
      uint16_t* a = s.a.get(m * K);
      for (int64_t i = 0; i < m; ++i) split_even_odd_bf16(x_in + i * K, K, a + i * K);
      const W8NibbleTables tables = w8_nibble_tables();
      with_rows(m, [&](auto mr) {
        for_each_row_block(0, N, [&](int64_t o_begin, int64_t o_end) {
          gemv_bytes_bf16<Dec, decltype(mr)::value>(dec, tables, a, bias, y, o_begin, o_end);
        });
      });
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
    if (panel_kind() == PanelKind::f32) {
      // The activations as they are (4-bit formats: permuted into the panel's chunk order); each thread
      // dequantizes its panels of whole 16-row blocks into FP32 scratch and multiplies them right away.
      float* a = s.xp.get(m * K);
      if constexpr (Dec::kNibbles) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < m; ++i) permute_like_chunks(x_in + i * K, K, a + i * K, nullptr);
      } else {
        a = const_cast<float*>(x_in);
      }
      const int64_t threads = std::max(1, omp_get_max_threads());
      const int64_t blocks = (N + 15) / 16;
      const int64_t max_blocks = std::max<int64_t>(1, kF32PanelBytes / 4 / K / 16);
      int64_t panels = (blocks + max_blocks - 1) / max_blocks;
      panels = std::min(blocks, (panels + threads - 1) / threads * threads);
      const int64_t panel_rows = (blocks + panels - 1) / panels * 16;
      const int64_t panel_count = (N + panel_rows - 1) / panel_rows;
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < panel_count; ++p) {
        const int64_t n0 = p * panel_rows, n = std::min(panel_rows, N - n0);
        float* panel = scratch().panel_f32.get(panel_rows * K);
        dequantize_rows_f32(dec, n0, n0 + n, panel);
        f32_panel_matmul(a, m, K, panel, n, bias != nullptr ? bias + n0 : nullptr, y + n0, N);
      }
      return;
    }
    // The activations rounded to BF16, rows split over the threads; for 4-bit formats first permuted
    // into the panel's chunk order (in the calling thread's scratch: each OpenMP thread has its own).
    uint16_t* a = s.a.get(m * K);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x_in + i * K;
      if constexpr (Dec::kNibbles) {
        float* row = scratch().xp.get(K);
        permute_like_chunks(xi, K, row, nullptr);
        xi = row;
      }
      to_bf16(xi, K, a + i * K);
    }
    // Panels of whole 16-row blocks within kPanelBytes, as many as a multiple of the thread count (a
    // balanced static split); each thread dequantizes its panels into its own scratch, which stays in its
    // L2, and multiplies them right away: no barrier between the two steps, no panel through L3.
    const int64_t threads = std::max(1, omp_get_max_threads());
    const int64_t blocks = (N + 15) / 16;
    const int64_t max_blocks = std::max<int64_t>(1, kPanelBytes / 2 / K / 16);
    int64_t panels = (blocks + max_blocks - 1) / max_blocks;
    panels = std::min(blocks, (panels + threads - 1) / threads * threads);
    const int64_t panel_rows = (blocks + panels - 1) / panels * 16;
    const int64_t panel_count = (N + panel_rows - 1) / panel_rows;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panel_count; ++p) {
      const int64_t n0 = p * panel_rows, n = std::min(panel_rows, N - n0);
      uint16_t* panel = scratch().panel.get(panel_rows * K);
      dequantize_rows_bf16(dec, n0, n0 + n, panel);
      bf16_panel_matmul(a, m, K, panel, n, bias != nullptr ? bias + n0 : nullptr, y + n0, N);
    }
  }
}

}  // namespace qjoule::kernels::avx512

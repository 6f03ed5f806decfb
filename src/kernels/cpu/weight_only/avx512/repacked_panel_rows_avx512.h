// The rows' prefill panels (weight_only_avx512.h: panel_prefill) decoded from weights repacked at load into
// 16-row panels (repacked/int4_repacked.h's codes, which nf4's and the FP4 formats' panels share): panel row j
// = W[o_begin + j, :] in the order the rows' decoders write it (chunk order, or W's own), each weight computed
// as theirs are, (T[u] − z) · d in FP32, then rounded to BF16 to nearest even. So a repacked matrix's prefill
// multiplies the very panels its rows' prefill would, on the same oneDNN matmul.
//
// A 128-weight chunk of a panel is 1,024 contiguous bytes: sixteen 64-byte registers i = 4·(32-block within
// the chunk) + j whose int32 lane r is row r. One 16 × 16 transpose of those dwords gives each row the chunk's
// codes as the rows' decoders hold them (lane l: weights 8l .. 8l + 7), with the nibbles in the repacked
// order: shift 4s holds weight s / 2 + 4·(s & 1) of its lane. The scales are decoded once a panel, for its
// 16 rows at a time, into a row-major table of the thread's (kScaleBlock weights a scale). Everything here
// runs at the avx512_bf16 level only (panel_prefill's), so it all carries that target.
//
// A layout supplies:
//   int64_t rows(), cols()                 // cols: the padded width, a multiple of kScaleBlock
//   static constexpr int kScaleBlock;      // 16, 32, 64 or 128
//   static constexpr bool kHasZero;        // weight = (T[u] − z) · d, else T[u] · d
//   __m512 table() const; float table_at(int u) const;
//   const uint8_t* codes(int64_t p) const  // panel p's codes
//   int64_t panel_bytes() const            // a panel's bytes (codes, then scales)
//   void scales(int64_t p, int64_t s, __m512& d, __m512& z) const
//       // lane r: scale block s of panel p's row r (z: only where kHasZero; the padding rows' lanes: any finite
//       // value, never stored)
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/weight_only/avx512/weight_only_avx512.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"

namespace qjoule::kernels::detail::repacked_rows {

using avx512::kChunk;

// out[j] lane i = r[i] lane j, for the 16 × 16 dwords of r (in place).
QJOULE_TARGET_AVX512_BF16 inline void transpose_16x16_epi32(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  __m512i u[16];  // u[4g + k], 128-bit lane q: column 4q + k of rows 4g .. 4g + 3
  for (int g = 0; g < 4; ++g) {
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int k = 0; k < 4; ++k) {  // the 4 × 4 transpose of 128-bit lanes among u[k], u[4 + k], u[8 + k], u[12 + k]
    const __m512i a = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i b = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i c = _mm512_shuffle_i32x4(u[k], u[4 + k], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512i d = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], _MM_SHUFFLE(3, 2, 3, 2));
    r[k] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + k] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + k] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + k] = _mm512_shuffle_i32x4(c, d, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// The weight of its lane that nibble shift 4s holds in a repacked dword.
constexpr int weight_at_shift(int s) { return s / 2 + 4 * (s & 1); }

// A thread's scratch for the panel it decodes: its scales row-major, d[r · blocks + s] (and z) for its 16 rows and
// a row's `blocks` scale blocks, and its codes in the rows' order.
struct PanelScratch {
  std::vector<float> d, z;
  int64_t blocks = 0;
  std::vector<uint8_t> row_codes;
};
inline PanelScratch& panel_scratch() {
  thread_local PanelScratch t;
  return t;
}

// The table from the layout's vectors of 16 rows' scales, sixteen scale blocks at a time transposed in registers.
template <class L>
QJOULE_TARGET_AVX512_BF16 void fill_panel_scales(const L& l, int64_t p, PanelScratch& t) {
  t.blocks = l.cols() / L::kScaleBlock;
  t.d.resize(static_cast<std::size_t>(kRepackedRows * t.blocks));
  if constexpr (L::kHasZero) t.z.resize(static_cast<std::size_t>(kRepackedRows * t.blocks));
  for (int64_t s0 = 0; s0 < t.blocks; s0 += 16) {
    const int64_t count = std::min<int64_t>(16, t.blocks - s0);
    __m512i d[16], z[16];
    for (int i = 0; i < 16; ++i) {
      __m512 di = _mm512_setzero_ps(), zi = _mm512_setzero_ps();
      if (i < count) l.scales(p, s0 + i, di, zi);
      d[i] = _mm512_castps_si512(di);
      z[i] = _mm512_castps_si512(zi);
    }
    transpose_16x16_epi32(d);  // d[r] lane i: scale block s0 + i of row r
    const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << count) - 1);
    for (int r = 0; r < 16; ++r) _mm512_mask_storeu_epi32(t.d.data() + r * t.blocks + s0, mask, d[r]);
    if constexpr (L::kHasZero) {
      transpose_16x16_epi32(z);
      for (int r = 0; r < 16; ++r) _mm512_mask_storeu_epi32(t.z.data() + r * t.blocks + s0, mask, z[r]);
    }
  }
}

// emit(j, c, v): row j's chunk c, v[w] lane l = weight 8l + w of the chunk, decoded; tail(j, k, value): the
// weights past the last whole chunk, in W's order.
template <class L, class Emit, class Tail>
QJOULE_TARGET_AVX512_BF16 void decode_panels(const L& l, int64_t o_begin, int64_t o_end, const Emit& emit,
                                             const Tail& tail) {
  constexpr int kSpc = static_cast<int>(kChunk) / L::kScaleBlock;  // scale blocks a chunk
  const int64_t K = l.cols(), chunks = K / kChunk;
  PanelScratch& t = panel_scratch();
  const __m512 table = l.table();
  if (t.row_codes.size() < static_cast<std::size_t>(kRepackedRows * chunks * 64)) {
    t.row_codes.resize(static_cast<std::size_t>(kRepackedRows * chunks * 64));
  }
  const __mmask16 spc_mask = static_cast<__mmask16>((1u << kSpc) - 1);
  const __m512i lane_scale = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               __builtin_ctz(16 / kSpc));  // lane l: scale block l / (16 / kSpc)
  for (int64_t p = o_begin / kRepackedRows; p * kRepackedRows < o_end; ++p) {
    const int64_t first = p * kRepackedRows, here = std::min(kRepackedRows, o_end - first);
    fill_panel_scales(l, p, t);
    const uint8_t* codes = l.codes(p);
    // The panel's codes transposed, chunk by chunk, into the rows' order (row r's chunk c: 64 bytes at
    // row_codes + (r · chunks + c) · 64), then decoded row by row: each row's panel output written in order.
    for (int64_t c = 0; c < chunks; ++c) {
      __m512i rows[16];
      for (int i = 0; i < 16; ++i) rows[i] = _mm512_loadu_si512(codes + c * 1024 + 64 * i);
      transpose_16x16_epi32(rows);
      for (int r = 0; r < 16; ++r) _mm512_storeu_si512(t.row_codes.data() + (r * chunks + c) * 64, rows[r]);
    }
    // The next panel prefetched while this one is decoded, two lines a row's chunk (its codes have one line a
    // row's chunk; its scales, fewer bytes than its codes, follow them), so that the transposes and the scales
    // above read from the caches, not from memory.
    const char* next = (p + 1) * kRepackedRows < l.rows() ? reinterpret_cast<const char*>(l.codes(p + 1)) : nullptr;
    const int64_t next_lines = l.panel_bytes() / 64, code_lines = kRepackedRows * chunks;
    for (int64_t r = 0; r < here; ++r) {
      const float* dr = t.d.data() + r * t.blocks;
      [[maybe_unused]] const float* zr = L::kHasZero ? t.z.data() + r * t.blocks : nullptr;
      for (int64_t c = 0; c < chunks; ++c) {
        if (next != nullptr) {
          const int64_t line = r * chunks + c;
          _mm_prefetch(next + line * 64, _MM_HINT_T0);
          if (code_lines + line < next_lines) _mm_prefetch(next + (code_lines + line) * 64, _MM_HINT_T0);
        }
        const __m512i row = _mm512_loadu_si512(t.row_codes.data() + (r * chunks + c) * 64);
        const __m512 d = _mm512_permutexvar_ps(lane_scale, _mm512_maskz_loadu_ps(spc_mask, dr + c * kSpc));
        [[maybe_unused]] __m512 z = _mm512_setzero_ps();
        if constexpr (L::kHasZero)
          z = _mm512_permutexvar_ps(lane_scale, _mm512_maskz_loadu_ps(spc_mask, zr + c * kSpc));
        __m512 v[8];
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(row, 4 * s), table);
          if constexpr (L::kHasZero) w = _mm512_sub_ps(w, z);
          v[weight_at_shift(s)] = _mm512_mul_ps(w, d);
        }
        emit(first + r - o_begin, c, v);
      }
    }
    for (int64_t r = 0; r < here; ++r) {
      for (int64_t k = chunks * kChunk; k < K; ++k) {
        const int64_t sb = r * t.blocks + k / L::kScaleBlock;
        const int u = repacked_code(codes, repacked_nibble_at(k / kRepackedBlock, r, static_cast<int>(k % 32)));
        float w = l.table_at(u);
        if constexpr (L::kHasZero) w -= t.z[static_cast<std::size_t>(sb)];
        tail(first + r - o_begin, k, w * t.d[static_cast<std::size_t>(sb)]);
      }
    }
  }
}

// The three panels of panel_prefill, from a repacked layout (rows [o_begin, o_end): o_begin a multiple of 16).
template <class L>
QJOULE_TARGET_AVX512_BF16 void dequantize_rows_bf16(const L& l, int64_t o_begin, int64_t o_end, uint16_t* panel) {
  const int64_t K = l.cols();
  decode_panels(
      l, o_begin, o_end,
      [&](int64_t j, int64_t c, const __m512(&v)[8]) QJOULE_TARGET_AVX512_BF16 {
        // Chunk order: position 16s + l holds weight 8l + (s ^ 1); a pair of positions is one cvtne2ps.
        for (int s = 0; s < 8; s += 2) {
          const __m512bh pair = _mm512_cvtne2ps_pbh(v[s], v[s + 1]);
          _mm512_storeu_si512(panel + j * K + c * kChunk + 16 * s, reinterpret_cast<const __m512i&>(pair));
        }
      },
      [&](int64_t j, int64_t k, float w) QJOULE_TARGET_AVX512_BF16 { panel[j * K + k] = f32_to_bf16_bits(w); });
}

template <class L, bool kNatural>
QJOULE_TARGET_AVX512_BF16 void dequantize_rows_f32(const L& l, int64_t o_begin, int64_t o_end, float* panel) {
  const int64_t K = l.cols();
  decode_panels(
      l, o_begin, o_end,
      [&](int64_t j, int64_t c, const __m512(&v)[8]) QJOULE_TARGET_AVX512_BF16 {
        float* out = panel + j * K + c * kChunk;
        if constexpr (kNatural) {
          avx512::store_transposed_8x16(v, out);
        } else {
          for (int w = 0; w < 8; ++w) _mm512_storeu_ps(out + 16 * (w ^ 1), v[w]);
        }
      },
      [&](int64_t j, int64_t k, float w) QJOULE_TARGET_AVX512_BF16 { panel[j * K + k] = w; });
}

// y = x · Wᵀ + bias for m > 4 rows of x (l.cols() columns) on the rows' prefill panels.
template <class L>
void panel_prefill(const L& l, const float* bias, const float* x, int64_t m, float* y) {
  avx512::panel_prefill</*kChunked=*/true>(
      x, m, l.rows(), l.cols(), bias, y,
      [&l](int64_t o_begin, int64_t o_end, uint16_t* panel) { dequantize_rows_bf16(l, o_begin, o_end, panel); },
      [&l](int64_t o_begin, int64_t o_end, float* panel) { dequantize_rows_f32<L, false>(l, o_begin, o_end, panel); },
      [&l](int64_t o_begin, int64_t o_end, float* panel) { dequantize_rows_f32<L, true>(l, o_begin, o_end, panel); });
}

}  // namespace qjoule::kernels::detail::repacked_rows

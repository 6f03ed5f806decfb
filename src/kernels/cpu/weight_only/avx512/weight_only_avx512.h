// The AVX-512 driver shared by the weight-only formats (w8, int4, nf4, nf4:dq, mxfp4, nvfp4): a format
// supplies a *decoder*, this file (prefill panels, run_gemm) and weight_only_gemv_avx512.h (the GEMVs) supply the
// loops. Included only by the gemm_*_avx512.cpp files; every function
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
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_avx512.h"

namespace qjoule::kernels::avx512 {

static_assert(kGemvMaxRows == kGemvMaxRowsForPanels, "the GEMVs and the panels split products at the same m");

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

// out[8·l + s] = u[s][l] for the 8 x 16 matrix u (s < 8, l < 16): 128 floats, in-register shuffles (32)
// and 256-bit stores in place of 8 scatters of 16: the whole panel's decode in half the time (perf, int4
// 1024 x 768 x 3072 on 2 threads: 2.35% -> 1.24% of the samples, oneDNN's matmul 55%).
QJOULE_TARGET_AVX512 inline void store_transposed_8x16(const __m512 u[8], float* out) {
  // In each 128-bit lane q (columns 4q .. 4q + 3): pairs of rows interleaved, then s[i] = column 4q + i,
  // rows 0-3, and s[4 + i] = the same column, rows 4-7.
  const __m512 t0 = _mm512_unpacklo_ps(u[0], u[1]), t1 = _mm512_unpackhi_ps(u[0], u[1]);
  const __m512 t2 = _mm512_unpacklo_ps(u[2], u[3]), t3 = _mm512_unpackhi_ps(u[2], u[3]);
  const __m512 t4 = _mm512_unpacklo_ps(u[4], u[5]), t5 = _mm512_unpackhi_ps(u[4], u[5]);
  const __m512 t6 = _mm512_unpacklo_ps(u[6], u[7]), t7 = _mm512_unpackhi_ps(u[6], u[7]);
  const __m512 s[8] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xEE),
                       _mm512_shuffle_ps(t1, t3, 0x44), _mm512_shuffle_ps(t1, t3, 0xEE),
                       _mm512_shuffle_ps(t4, t6, 0x44), _mm512_shuffle_ps(t4, t6, 0xEE),
                       _mm512_shuffle_ps(t5, t7, 0x44), _mm512_shuffle_ps(t5, t7, 0xEE)};
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    // Lanes [a0, a1, b0, b1] -> [a0, b0, a1, b1]: column i (rows 0-7), then column 4 + i; the same for 8 + i, 12 + i.
    const __m512 lo = _mm512_shuffle_f32x4(s[i], s[4 + i], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi = _mm512_shuffle_f32x4(s[i], s[4 + i], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 x = _mm512_shuffle_f32x4(lo, lo, _MM_SHUFFLE(3, 1, 2, 0));
    const __m512 y = _mm512_shuffle_f32x4(hi, hi, _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_ps(out + 8 * i, _mm512_castps512_ps256(x));
    _mm256_storeu_ps(out + 8 * (4 + i), _mm512_extractf32x8_ps(x, 1));
    _mm256_storeu_ps(out + 8 * (8 + i), _mm512_castps512_ps256(y));
    _mm256_storeu_ps(out + 8 * (12 + i), _mm512_extractf32x8_ps(y, 1));
  }
}

// The same into an FP32 panel (the FP32 panel prefill: CPUs whose BF16 dot products are no faster than
// FP32 FMAs): panel row j = W[o_begin + j, :], unrounded, in the same order (kNatural = false: a 4-bit
// row's chunks in the GEMVs' lane order, matched by permute_like_chunks on the activations) or in W's
// own order (kNatural: the chunk's 8 decoded vectors transposed back, decoded vector s, lane l holding
// weight 8·l + (s ^ 1) of its chunk; the whole-panel prefill, whose activations are then used as they are).
template <class Dec, bool kNatural = false>
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
        [[maybe_unused]] __m512 decoded[8];
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4 * s), table);
          if constexpr (Dec::kHasZero) w = _mm512_sub_ps(w, z);
          if constexpr (kNatural) {
            decoded[s ^ 1] = _mm512_mul_ps(w, d);  // row s ^ 1 of the 8 x 16 matrix whose transpose is natural
          } else {
            _mm512_storeu_ps(out + c * kChunk + 16 * s, _mm512_mul_ps(w, d));
          }
        }
        if constexpr (kNatural) store_transposed_8x16(decoded, out + c * kChunk);
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
  ScratchBuffer<float> xp, xs;
  ScratchBuffer<uint16_t> a;
};
inline Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// The prefill (m > kGemvMaxRows) of the avx512_bf16 level, on the panels panel_kind() chose for this CPU, of a
// weight whose rows [o_begin, o_end) (whole 16-row blocks) `fill_bf16` / `fill_f32` decode into a BF16 / FP32
// panel in the GEMVs' order (kChunked, the 4-bit formats: chunk order, matched by permute_like_chunks on the
// activations) and `fill_f32_natural` into an FP32 panel in W's own order (the whole-panel product, whose
// activations are then used as they are). The rows' prefill (run_gemm) and the repacked layouts' share it.
template <bool kChunked, class FillBf16, class FillF32, class FillF32Natural>
void panel_prefill(const float* x_in, int64_t m, int64_t N, int64_t K, const float* bias, float* y,
                   const FillBf16& fill_bf16, const FillF32& fill_f32, const FillF32Natural& fill_f32_natural) {
  Scratch& s = scratch();
  if (panel_kind() == PanelKind::f32) {
    if (whole_panel_applies(m, N, K)) {  // one panel of W in its own order: the activations as they are
      f32_whole_panel_gemm(x_in, m, N, K, bias, y, fill_f32_natural);
      return;
    }
    // The activations as they are (4-bit formats: permuted into the panel's chunk order); each thread
    // dequantizes its panels of whole 16-row blocks into FP32 scratch and multiplies them right away.
    float* a = s.xp.get(m * K);
    if constexpr (kChunked) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < m; ++i) permute_like_chunks(x_in + i * K, K, a + i * K, nullptr);
    } else {
      a = const_cast<float*>(x_in);
    }
    f32_panel_gemm(a, m, N, K, bias, y, fill_f32);
    return;
  }
  // The activations rounded to BF16, rows split over the threads; for 4-bit formats first permuted
  // into the panel's chunk order (in the calling thread's scratch: each OpenMP thread has its own).
  uint16_t* a = s.a.get(m * K);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x_in + i * K;
    if constexpr (kChunked) {
      float* row = scratch().xp.get(K);
      permute_like_chunks(xi, K, row, nullptr);
      xi = row;
    }
    to_bf16(xi, K, a + i * K);
  }
  bf16_panel_gemm(a, m, N, K, bias, y, fill_bf16);  // one whole panel from kWholePanelMinRows rows on
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
    panel_prefill<Dec::kNibbles>(
        x_in, m, N, K, bias, y,
        [&dec](int64_t o_begin, int64_t o_end, uint16_t* panel) { dequantize_rows_bf16(dec, o_begin, o_end, panel); },
        [&dec](int64_t o_begin, int64_t o_end, float* panel) { dequantize_rows_f32(dec, o_begin, o_end, panel); },
        [&dec](int64_t o_begin, int64_t o_end, float* panel) {
          dequantize_rows_f32<Dec, /*kNatural=*/true>(dec, o_begin, o_end, panel);
        });
  }
}

}  // namespace qjoule::kernels::avx512

// NF4 weights × FP32 activations on AVX512_VNNI over weights repacked at load into 16-row panels
// ("qjoule:avx512_vnni:nf4_x16_repacked", every m; layout: nf4_repacked.h, threads:
// repacked_panels_avx512_vnni.h). The table's values become 16-bit integers T16 = round(T · 2^12) (|T16| <=
// 4096: a weight off by at most 2^-13 of its block's absmax, where a BF16 product keeps 2^-9 of each value;
// the row-wise x16 GEMV keeps 2^-14 but sums 8 products a lane between conversions), the activations 16-bit
// integers per 32-block (quantize_block_x16.h: 2^-16 of the block's largest value). Per 128 weights of a
// panel (one register of codes: 8 codes of each of 16 rows), three shifts and four vpermw give the 16-bit
// values of element pairs (0, 2), (4, 6), (1, 3), (5, 7) of every row, each met by one vpdpwssd with that
// pair of activations broadcast. A lane sums 16 products before one conversion: |Σ| <= 16 · 4096 · 32767 <
// 2^31, exact. Per 32-block and activation row, the two halves' sums are converted, added and scaled by the
// block's activation scale; per 64-block, one FMA by the rows' absmax. nf4:dq ("nf4dq_x16_repacked") decodes
// the 16 rows' absmax there as formats.h does, map[code] · scale + mean (a product, then a sum: no FMA), the map
// value by one gather, the group scale by one permute (PanelAbsmax; the 1 KiB map and the scales, 1/16 of the
// codes' bytes, stay in the caches); prefill decodes a panel's absmax once. A row holding a NaN or Inf is
// multiplied by the FP32 twin (gemm_nf4_f32_repacked_ref), as IEEE arithmetic has it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/weight_only/avx512/nf4_panel_absmax_avx512.h"
#include "kernels/cpu/weight_only/avx512_vnni/repacked_panels_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_block_x16.h"
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"

namespace qjoule::kernels::detail {
namespace {

constexpr float kTableScale = 4096.0f;  // T16 = round(T · 2^12)

// vpermw's table: T16 of the code in an index word's low four bits, twice over (bit 4 of the index is the
// next code's lowest bit, which selects the copy).
struct Nf4Words {
  alignas(64) int16_t w[32];
};
const Nf4Words& nf4_words() {
  static const Nf4Words words = [] {
    Nf4Words t{};
    for (int i = 0; i < 32; ++i)
      t.w[i] = static_cast<int16_t>(std::nearbyint(quant::kNf4Table[static_cast<std::size_t>(i % 16)] * kTableScale));
    return t;
  }();
  return words;
}

// 32 activations as 16-bit integers, in the pairs the four lookups of register j yield: dword 4j + p holds
// elements (8j + a_p, 8j + b_p), (a, b) = (0, 2), (4, 6), (1, 3), (5, 7), the first in the low word.
struct Nf4X16Block {
  int32_t pairs[16];
  float s;  // the block's scale over kTableScale
};

// vpermw's indices from a block's 32 words in element order to Nf4X16Block::pairs: word n of the pairs is
// element 8j + a_p + 2h (j = n / 8, p = n / 2 % 4, h = n % 2, a = 0, 4, 1, 5).
struct PairOrder {
  alignas(64) int16_t words[32]{};
  constexpr PairOrder() {
    constexpr int kFirst[4] = {0, 4, 1, 5};
    for (int n = 0; n < 32; ++n) words[n] = static_cast<int16_t>(8 * (n / 8) + kFirst[n / 2 % 4] + 2 * (n % 2));
  }
};
constexpr PairOrder kPairOrder{};

QJOULE_TARGET_REPACKED_VNNI bool quantize_row_nf4_x16(const float* x, int64_t nb32, Nf4X16Block* out) {
  const __m512i idx = _mm512_load_si512(kPairOrder.words);
  __mmask16 bad = 0;
  for (int64_t b = 0; b < nb32; ++b) {
    const BlockX16 block = quantize_block_x16(x + b * kRepackedBlock);
    bad |= block.bad;
    const __m512i words =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(block.q0)), _mm512_cvtepi32_epi16(block.q1), 1);
    _mm512_storeu_si512(out[b].pairs, _mm512_permutexvar_epi16(idx, words));
    out[b].s = block.s / kTableScale;
  }
  return bad == 0;
}

// The 16-bit values of register j's four lookups (k = 0..3: elements (0, 2), (4, 6), (1, 3), (5, 7)).
QJOULE_TARGET_REPACKED_VNNI inline __m512i lookup(__m512i codes, __m512i table, int k) {
  return _mm512_permutexvar_epi16(_mm512_srli_epi16(codes, 4 * k), table);
}

struct alignas(64) Zmm {
  int16_t words[32];
};

// A panel's looked-up values ([nb32][4 registers][4 lookups]) and its rows' absmax ([nb64][16], nf4:dq's
// decoded), once for the activation rows that meet it in turn (prefill).
struct LookedUpPanel {
  std::vector<Zmm> values;
  std::vector<float> absmax;
};

template <bool kDq>
QJOULE_TARGET_REPACKED_VNNI void lookup_panel(const RepackedNf4& w, int64_t p, const PanelAbsmax& absmax_of,
                                              LookedUpPanel& out) {
  const __m512i table = _mm512_load_si512(nf4_words().w);
  const uint8_t* panel = w.panel(p);
  out.values.resize(static_cast<std::size_t>(w.blocks32() * 16));
  out.absmax.resize(static_cast<std::size_t>(w.blocks64() * kRepackedRows));
  for (int64_t r = 0; r < w.blocks32() * 4; ++r) {
    const __m512i codes = _mm512_loadu_si512(panel + 64 * r);
    for (int k = 0; k < 4; ++k)
      _mm512_store_si512(out.values[static_cast<std::size_t>(4 * r + k)].words, lookup(codes, table, k));
  }
  const __m512i first_block = absmax_of.first_blocks(p);
  for (int64_t g = 0; g < w.blocks64(); ++g)
    _mm512_storeu_ps(out.absmax.data() + g * kRepackedRows, absmax_of.at<kDq>(panel, first_block, g));
}

// y[i, 16p .. 16p + 16 · PR) for MR activation rows, PR panels side by side (repacked_panels_avx512_vnni.h);
// `looked_up`: the one panel's lookup_panel (PR = 1), or nullptr to look the values up and decode the absmax here.
template <bool kDq, int MR, int PR>
QJOULE_TARGET_REPACKED_VNNI void nf4_panel_rows(const PanelAbsmax& absmax_of, int64_t p0, const Nf4X16Block* xa,
                                                const float* bias, float* y, const LookedUpPanel* looked_up) {
  const RepackedNf4& w = absmax_of.w;
  const int64_t N = w.rows, nb32 = w.blocks32();
  const uint8_t* panels[PR];
  __m512i first_block[PR];
  for (int q = 0; q < PR; ++q) {
    panels[q] = w.panel(p0 + q);
    if constexpr (kDq) first_block[q] = absmax_of.first_blocks(p0 + q);
  }
  const __m512i table = _mm512_load_si512(nf4_words().w);
  __m512 acc[PR][MR];
  for (int q = 0; q < PR; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.blocks64(); ++g) {
    __m512 block_sum[PR][MR];  // Σ over the 64-block's two 32-blocks of (Σ T16 · q) · s
    for (int s = 0; s < 2; ++s) {
      const int64_t b = 2 * g + s;
      __m512 half_sum[PR][MR];
      for (int half = 0; half < 2; ++half) {
        __m512i t[PR][MR][2];  // two chains a row and panel: vpdpwssd's latency is not one chain's to wait on
        for (int q = 0; q < PR; ++q)
          for (int i = 0; i < MR; ++i) t[q][i][0] = t[q][i][1] = _mm512_setzero_si512();
        for (int j = 2 * half; j < 2 * half + 2; ++j) {
          for (int q = 0; q < PR; ++q) {
            __m512i codes = _mm512_setzero_si512();
            if (looked_up == nullptr) {
              codes = _mm512_loadu_si512(panels[q] + b * kRepackedBlockBytes + 64 * j);
              asm volatile("" : "+v"(codes));  // one load a register, not one per lookup
            }
            for (int k = 0; k < 4; ++k) {
              const __m512i v =
                  looked_up != nullptr
                      ? _mm512_load_si512(looked_up->values[static_cast<std::size_t>(16 * b + 4 * j + k)].words)
                      : lookup(codes, table, k);
              for (int i = 0; i < MR; ++i) {
                t[q][i][k & 1] =
                    _mm512_dpwssd_epi32(t[q][i][k & 1], v, _mm512_set1_epi32(xa[i * nb32 + b].pairs[4 * j + k]));
              }
            }
          }
        }
        for (int q = 0; q < PR; ++q)
          for (int i = 0; i < MR; ++i) {
            const __m512 f = _mm512_cvtepi32_ps(_mm512_add_epi32(t[q][i][0], t[q][i][1]));
            half_sum[q][i] = half == 0 ? f : _mm512_add_ps(half_sum[q][i], f);
          }
      }
      for (int i = 0; i < MR; ++i) {
        const __m512 scale = _mm512_set1_ps(xa[i * nb32 + b].s);
        for (int q = 0; q < PR; ++q) {
          block_sum[q][i] =
              s == 0 ? _mm512_mul_ps(half_sum[q][i], scale) : _mm512_fmadd_ps(half_sum[q][i], scale, block_sum[q][i]);
        }
      }
    }
    for (int q = 0; q < PR; ++q) {
      const __m512 absmax = looked_up != nullptr ? _mm512_loadu_ps(looked_up->absmax.data() + g * kRepackedRows)
                                                 : absmax_of.at<kDq>(panels[q], first_block[q], g);
      for (int i = 0; i < MR; ++i) acc[q][i] = _mm512_fmadd_ps(block_sum[q][i], absmax, acc[q][i]);
    }
  }
  repacked::store_panel_outputs<MR, PR>(acc, p0, N, bias, y);
}

// Decode (m <= 4): the shared loops, panels side by side. Prefill: a thread takes one panel at a time, looks its
// values up and decodes its absmax once (in its L2: K / 32 · 1 KiB) and meets every activation row with them,
// four rows at a time.
template <bool kDq>
void run_nf4_panels(const RepackedNf4& w, const Nf4X16Block* xa, int64_t m, const float* bias, float* y) {
  const int64_t N = w.rows, nb32 = w.blocks32();
  const PanelAbsmax absmax_of{w};
  if (m <= repacked::kMaxRowsAtOnce) {
    repacked::for_panels(N, w.panels(), nb32, xa, m, y,
                         [&](int64_t mr, int64_t p, int64_t count, const Nf4X16Block* xr, float* yr) {
                           repacked::dispatch_panel_rows(mr, p, count, [&]<int MR, int PR>(int64_t p0) {
                             nf4_panel_rows<kDq, MR, PR>(absmax_of, p0, xr, bias, yr, nullptr);
                           });
                         });
    return;
  }
#pragma omp parallel
  {
    thread_local LookedUpPanel looked_up;
#pragma omp for schedule(dynamic)
    for (int64_t p = 0; p < w.panels(); ++p) {
      lookup_panel<kDq>(w, p, absmax_of, looked_up);
      for (int64_t i0 = 0; i0 < m; i0 += repacked::kMaxRowsAtOnce) {
        const Nf4X16Block* xr = xa + i0 * nb32;
        float* yr = y + i0 * N;
        switch (std::min(repacked::kMaxRowsAtOnce, m - i0)) {
          case 1: nf4_panel_rows<kDq, 1, 1>(absmax_of, p, xr, bias, yr, &looked_up); break;
          case 2: nf4_panel_rows<kDq, 2, 1>(absmax_of, p, xr, bias, yr, &looked_up); break;
          case 3: nf4_panel_rows<kDq, 3, 1>(absmax_of, p, xr, bias, yr, &looked_up); break;
          default: nf4_panel_rows<kDq, 4, 1>(absmax_of, p, xr, bias, yr, &looked_up); break;
        }
      }
    }
  }
}

}  // namespace

void gemm_nf4_x16_repacked_avx512_vnni(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m <= 0 || w.rows <= 0) return;
  const int64_t nb32 = w.blocks32();
  repacked::quantize_then_run_panels<Nf4X16Block>(
      x, m, nb32, [&](const float* row, Nf4X16Block* out) { return quantize_row_nf4_x16(row, nb32, out); },
      [&](const Nf4X16Block* blocks) {
        if (w.double_quant) {
          run_nf4_panels<true>(w, blocks, m, bias, y);
        } else {
          run_nf4_panels<false>(w, blocks, m, bias, y);
        }
      },
      [&] { gemm_nf4_f32_repacked_ref(w, bias, x, m, y); });
}

}  // namespace qjoule::kernels::detail

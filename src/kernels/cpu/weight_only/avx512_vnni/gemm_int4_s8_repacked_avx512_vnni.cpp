// int4 weights × INT8 activations on AVX512_VNNI over weights repacked at load into 16-row panels
// ("qjoule:avx512_vnni:int4_s8_repacked"; layout: int4_repacked.h). The arithmetic of gemm_int4_s8_scalar:
// per 32-block the exact integer Σ (u − z)·q, scaled by d_w · d_x into an FP32 accumulator. Per 32-block
// and panel: four 64-byte loads of codes, their low and high nibbles (one AND, one shift and AND each),
// and per activation row eight vpdpbusd with four activations broadcast from the q8 block as it is laid
// out (no reordering of the activations), −z·Σq by one vpmaddwd, one conversion and one FMA: int32 lane
// r is row r's sum, so a panel's sixteen outputs leave in one store, with no horizontal sums. The
// row-wise quads kernel (gemm_int4_s8_avx512_vnni.cpp) spends about three times the instructions a weight
// (in the caches, on a Zen 4 at 2 threads: 124 GB/s of weights against its 46). Decode (m <= 4) splits the
// panels evenly between the threads and reads four panels side by side for one activation row (two for
// two rows); prefill hands out single panels, each meeting every activation row four at a time from L1/L2.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"

#define QJOULE_TARGET_REPACKED_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))

namespace qjoule::kernels::detail {
namespace {

constexpr int64_t kMaxRowsAtOnce = 4;
// Panels a single activation row's pass reads side by side: four streams a thread. Measured on a Zen 4
// (2 threads, a 2048 × 5632 layer from memory, medians of 25 rounds): one panel at a time read at 31.6 GB/s
// where a plain read of the same bytes ran at 51.7 (the instruction window holds too few of one stream's
// misses); two at 42.5 of 56.6; four at 51.3 of 57.0, and at the plain read's rate whenever the host's
// memory ran slower (34.3 of 34.2).
constexpr int kPanelsAtOnceM1 = 4;

QJOULE_TARGET_REPACKED_VNNI inline __m512i broadcast4(const int8_t* p) {
  int32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// y[i, 16p .. 16p + 16 · PR) for MR activation rows (row i's q8 blocks at xq + i * nb32; its outputs at
// y + i * N): PR panels side by side, so that each broadcast activation meets PR registers of codes and
// each thread reads PR streams.
template <class Block, int MR, int PR>
QJOULE_TARGET_REPACKED_VNNI void panel_rows(const RepackedInt4<Block>& w, int64_t p0, const quant::BlockQ8Act* xq,
                                            const float* bias, float* y) {
  constexpr int S = RepackedInt4<Block>::kSubBlocks;
  const int64_t N = w.rows, nb32 = w.blocks32();
  const uint8_t* panels[PR];
  for (int q = 0; q < PR; ++q) panels[q] = w.panel(p0 + q);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 acc[PR][MR];
  for (int q = 0; q < PR; ++q)
    for (int i = 0; i < MR; ++i) acc[q][i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.groups(); ++g) {
    __m512 dw[PR];
    __m512i z[PR];
    for (int q = 0; q < PR; ++q) {
      dw[q] = _mm512_cvtph_ps(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(panels[q] + w.scales_offset() + g * kRepackedRows * 2)));
      z[q] = _mm512_set1_epi32(quant::kInt4SymZero);
      if constexpr (RepackedInt4<Block>::kAsym) {
        z[q] = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(panels[q] + w.zeros_offset() + g * kRepackedRows * 2)));
      }
    }
    for (int s = 0; s < S; ++s) {
      const int64_t b = g * S + s;
      __m512i t[PR][MR];
      for (int i = 0; i < MR; ++i) {
        const __m512i neg_sum = _mm512_set1_epi32(static_cast<uint16_t>(-xq[i * nb32 + b].sum));  // |Σq| <= 32·127
        for (int q = 0; q < PR; ++q) t[q][i] = _mm512_madd_epi16(z[q], neg_sum);  // −z·Σq: (z, 0) · (−Σq, 0)
      }
      for (int j = 0; j < 4; ++j) {
        __m512i lo[PR], hi[PR];
        for (int q = 0; q < PR; ++q) {
          __m512i codes = _mm512_loadu_si512(panels[q] + b * kRepackedBlockBytes + 64 * j);
          asm volatile("" : "+v"(codes));  // one load a register, not one per use
          lo[q] = _mm512_and_si512(codes, low4);
          hi[q] = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4);
        }
        for (int i = 0; i < MR; ++i) {
          const int8_t* qs = xq[i * nb32 + b].qs + 8 * j;
          const __m512i x_lo = broadcast4(qs), x_hi = broadcast4(qs + 4);
          for (int q = 0; q < PR; ++q) {
            t[q][i] = _mm512_dpbusd_epi32(t[q][i], lo[q], x_lo);
            t[q][i] = _mm512_dpbusd_epi32(t[q][i], hi[q], x_hi);
          }
        }
      }
      for (int i = 0; i < MR; ++i) {
        const __m512 d = _mm512_set1_ps(xq[i * nb32 + b].d);
        for (int q = 0; q < PR; ++q) {
          acc[q][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[q][i]), _mm512_mul_ps(dw[q], d), acc[q][i]);
        }
      }
    }
  }
  for (int q = 0; q < PR; ++q) {
    const int64_t o = (p0 + q) * kRepackedRows, here = std::min(kRepackedRows, N - o);
    const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << here) - 1);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + o) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * N + o, mask, _mm512_add_ps(acc[q][i], b));
  }
}

// Panels [p, p + count) for mr activation rows: PR panels at a time, as many as the registers allow.
template <class Block>
void panel_rows_dispatch(int64_t mr, const RepackedInt4<Block>& w, int64_t p, int64_t count,
                         const quant::BlockQ8Act* xq, const float* bias, float* y) {
  const int64_t end = p + count;
  if (mr == 1) {
    for (; p + kPanelsAtOnceM1 <= end; p += kPanelsAtOnceM1) panel_rows<Block, 1, kPanelsAtOnceM1>(w, p, xq, bias, y);
  }
  if (mr == 2) {
    for (; p + 2 <= end; p += 2) panel_rows<Block, 2, 2>(w, p, xq, bias, y);
  }
  for (; p < end; ++p) {
    switch (mr) {
      case 1: panel_rows<Block, 1, 1>(w, p, xq, bias, y); break;
      case 2: panel_rows<Block, 2, 1>(w, p, xq, bias, y); break;
      case 3: panel_rows<Block, 3, 1>(w, p, xq, bias, y); break;
      default: panel_rows<Block, 4, 1>(w, p, xq, bias, y); break;
    }
  }
}

}  // namespace

template <class Block>
void gemm_int4_s8_repacked_avx512_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                       float* y, std::string_view layer) {
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = w.blocks32(), panels = w.panels();
  if (m <= 0 || N <= 0) return;
  thread_local std::vector<quant::BlockQ8Act> xq;  // reused: no allocation per decode step
  xq.resize(static_cast<std::size_t>(m * nb32));
  quantize_rows_q8_act_avx2(x, m, K, xq.data(), layer);
  const quant::BlockQ8Act* xa = xq.data();
  if (m <= kMaxRowsAtOnce) {  // decode: the panels split evenly, each read once
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t begin = panels * t / threads, end = panels * (t + 1) / threads;
      panel_rows_dispatch<Block>(m, w, begin, end - begin, xa, bias, y);
    }
    return;
  }
  // prefill: a panel (16 rows, in L1 / L2) meets every activation row, four at a time
#pragma omp parallel for schedule(dynamic)
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t i0 = 0; i0 < m; i0 += kMaxRowsAtOnce) {
      panel_rows_dispatch<Block>(std::min(kMaxRowsAtOnce, m - i0), w, p, 1, xa + i0 * nb32, bias, y + i0 * N);
    }
  }
}

#define QJOULE_INT4_S8_REPACKED(BLOCK)                                                                          \
  template void gemm_int4_s8_repacked_avx512_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, \
                                                         int64_t, float*, std::string_view);
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<32>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<64>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<128>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<32>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<64>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_S8_REPACKED

}  // namespace qjoule::kernels::detail

// What qjoule's kernels on repacked int4 weights share (layout: repacked/int4_repacked.h): the loops over a
// panel's 32-blocks, the panels side by side, the threads. A kernel supplies its activations as Act:
//   Act::Block                       one 32-block of one activation row, as the kernel laid it out
//   __m512i Act::zero_words(z)       the group's zero points (int32 lanes) as start() takes them
//   Act::Sums Act::start(zw, a)      the block's int32 sums before any product (the zero point's term)
//   Act::add(sums, lo, hi, a, j)     register j's low (elements 8j + t) and high (8j + 4 + t) nibbles
//   __m512i Act::total(sums)         Σ (u − z)·q of each lane's row, exact in int32
//   float Act::scale(a)              the block's activation scale (d_w · scale multiplies the total)
// Int32 lane r of every register is the panel's row r, so a panel's 16 outputs leave in one store, with no
// horizontal sums. Included only by the gemm_*_repacked_avx512_vnni.cpp files (the FP4 panels share the
// threads' loops: dispatch_panel_rows, for_panels).
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/weight_only/repacked/int4_repacked.h"

#define QJOULE_TARGET_REPACKED_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))

namespace qjoule::kernels::detail::repacked {

constexpr int64_t kMaxRowsAtOnce = 4;  // activation rows that share one unpacking of a panel's codes
// Panels a single activation row's pass reads side by side: four streams a thread. Measured on a Zen 4
// (2 threads, a 2048 × 5632 layer from memory, medians of 25 rounds): one panel at a time read at 31.6 GB/s
// where a plain read of the same bytes ran at 51.7 (the instruction window holds too few of one stream's
// misses); two at 42.5 of 56.6; four at 51.3 of 57.0, and at the plain read's rate whenever the host's
// memory ran slower (34.3 of 34.2).
constexpr int kPanelsAtOnceM1 = 4;

QJOULE_TARGET_REPACKED_VNNI inline __m512i broadcast4(const void* p) {
  int32_t v = 0;
  std::memcpy(&v, p, sizeof(v));
  return _mm512_set1_epi32(v);
}

// The outputs of PR panels for MR activation rows (acc[q][i]: panel p0 + q, row i; rows past N not stored) plus
// the bias.
template <int MR, int PR>
QJOULE_TARGET_REPACKED_VNNI void store_panel_outputs(const __m512 (&acc)[PR][MR], int64_t p0, int64_t N,
                                                     const float* bias, float* y) {
  for (int q = 0; q < PR; ++q) {
    const int64_t o = (p0 + q) * kRepackedRows, here = std::min(kRepackedRows, N - o);
    const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << here) - 1);
    const __m512 b = bias != nullptr ? _mm512_maskz_loadu_ps(mask, bias + o) : _mm512_setzero_ps();
    for (int i = 0; i < MR; ++i) _mm512_mask_storeu_ps(y + i * N + o, mask, _mm512_add_ps(acc[q][i], b));
  }
}

// The m activation rows of x (nb32 32-blocks each, padded) into blocks (row i at blocks + i · nb32) by
// quantize_row(x row, its blocks), false where the row holds a NaN or Inf; on the threads from 8 rows on.
// False where any row does.
template <class XBlock, class QuantizeRow>
bool quantize_activation_rows(const float* x, int64_t m, int64_t nb32, XBlock* blocks,
                              const QuantizeRow& quantize_row) {
  int finite = 1;
#pragma omp parallel for schedule(static) reduction(& : finite) if (m >= 8)
  for (int64_t i = 0; i < m; ++i) finite &= quantize_row(x + i * nb32 * kRepackedBlock, blocks + i * nb32) ? 1 : 0;
  return finite != 0;
}

// What every x16 kernel on repacked weights does first: the m activation rows quantized into XBlocks (a
// thread-local buffer: no allocation per decode step), then panels(blocks); where a row holds a NaN or
// Inf, twin() instead (the FP32 twin on the repacked layout, as IEEE arithmetic has it).
template <class XBlock, class QuantizeRow, class Panels, class Twin>
void quantize_then_run_panels(const float* x, int64_t m, int64_t nb32, const QuantizeRow& quantize_row,
                              const Panels& panels, const Twin& twin) {
  thread_local std::vector<XBlock> xa;
  xa.resize(static_cast<std::size_t>(m * nb32));
  if (!quantize_activation_rows(x, m, nb32, xa.data(), quantize_row)) return twin();
  panels(static_cast<const XBlock*>(xa.data()));
}

// y[i, 16p .. 16p + 16 · PR) for MR activation rows (row i's blocks at xa + i * nb32; its outputs at
// y + i * N): PR panels side by side, so that each broadcast activation meets PR registers of codes and
// each thread reads PR streams.
template <class Act, class Block, int MR, int PR>
QJOULE_TARGET_REPACKED_VNNI void panel_rows(const RepackedInt4<Block>& w, int64_t p0, const typename Act::Block* xa,
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
      dw[q] = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panels[q] + w.scales_offset() + g * kRepackedRows * 2)));
      z[q] = _mm512_set1_epi32(quant::kInt4SymZero);
      if constexpr (RepackedInt4<Block>::kAsym) {
        z[q] = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(panels[q] + w.zeros_offset() + g * kRepackedRows * 2)));
      }
      z[q] = Act::zero_words(z[q]);  // once a group, not once a block and row
    }
    for (int s = 0; s < S; ++s) {
      const int64_t b = g * S + s;
      typename Act::Sums t[PR][MR];
      for (int i = 0; i < MR; ++i)
        for (int q = 0; q < PR; ++q) t[q][i] = Act::start(z[q], xa[i * nb32 + b]);
      for (int j = 0; j < 4; ++j) {
        __m512i lo[PR], hi[PR];
        for (int q = 0; q < PR; ++q) {
          __m512i codes = _mm512_loadu_si512(panels[q] + b * kRepackedBlockBytes + 64 * j);
          asm volatile("" : "+v"(codes));  // one load a register, not one per use
          lo[q] = _mm512_and_si512(codes, low4);
          hi[q] = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4);
        }
        for (int i = 0; i < MR; ++i)
          for (int q = 0; q < PR; ++q) Act::add(t[q][i], lo[q], hi[q], xa[i * nb32 + b], j);
      }
      for (int i = 0; i < MR; ++i) {
        const __m512 scale = _mm512_set1_ps(Act::scale(xa[i * nb32 + b]));
        for (int q = 0; q < PR; ++q) {
          acc[q][i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(Act::total(t[q][i])), _mm512_mul_ps(dw[q], scale), acc[q][i]);
        }
      }
    }
  }
  store_panel_outputs<MR, PR>(acc, p0, N, bias, y);
}

// Panels [p, p + count) for mr activation rows: rows.template operator()<MR, PR>(first panel) runs PR panels
// side by side for MR rows, as many panels at a time as the registers allow (shared with the FP4 panels).
template <class Rows>
void dispatch_panel_rows(int64_t mr, int64_t p, int64_t count, const Rows& rows) {
  const int64_t end = p + count;
  if (mr == 1) {
    for (; p + kPanelsAtOnceM1 <= end; p += kPanelsAtOnceM1) rows.template operator()<1, kPanelsAtOnceM1>(p);
  }
  if (mr == 2) {
    for (; p + 2 <= end; p += 2) rows.template operator()<2, 2>(p);
  }
  for (; p < end; ++p) {
    switch (mr) {
      case 1: rows.template operator()<1, 1>(p); break;
      case 2: rows.template operator()<2, 1>(p); break;
      case 3: rows.template operator()<3, 1>(p); break;
      default: rows.template operator()<4, 1>(p); break;
    }
  }
}

// y (N outputs a row) for m activation rows laid out in blocks (row i at xa + i * nb32), on the OpenMP
// threads, by panel_range(mr, first panel, panels, xa of the rows, y of the rows). Decode (m <= 4): the
// panels split evenly, each read once. Prefill: single panels handed out, each (16 rows, in L1 / L2) meeting
// every activation row four at a time.
template <class XBlock, class PanelRange>
void for_panels(int64_t N, int64_t panels, int64_t nb32, const XBlock* xa, int64_t m, float* y,
                const PanelRange& panel_range) {
  if (m <= kMaxRowsAtOnce) {
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t begin = panels * t / threads, end = panels * (t + 1) / threads;
      panel_range(m, begin, end - begin, xa, y);
    }
    return;
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t p = 0; p < panels; ++p) {
    for (int64_t i0 = 0; i0 < m; i0 += kMaxRowsAtOnce) {
      panel_range(std::min(kMaxRowsAtOnce, m - i0), p, int64_t{1}, xa + i0 * nb32, y + i0 * N);
    }
  }
}

// y = x · Wᵀ + bias for m activation rows laid out in blocks (row i at xa + i * blocks32).
template <class Act, class Block>
void run_panels(const RepackedInt4<Block>& w, const typename Act::Block* xa, int64_t m, const float* bias, float* y) {
  for_panels(w.rows, w.panels(), w.blocks32(), xa, m, y,
             [&](int64_t mr, int64_t p, int64_t count, const typename Act::Block* xr, float* yr) {
               dispatch_panel_rows(mr, p, count, [&]<int MR, int PR>(int64_t p0) {
                 panel_rows<Act, Block, MR, PR>(w, p0, xr, bias, yr);
               });
             });
}

}  // namespace qjoule::kernels::detail::repacked

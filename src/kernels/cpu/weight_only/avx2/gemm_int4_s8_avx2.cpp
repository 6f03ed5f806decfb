// int4 weights × INT8 activations (W4A8): activations are quantized per row in blocks of 32
// (quant::BlockQ8Act, bit-identical to quant::quantize_row_q8_act_ref); for each 32-block the 32
// unsigned weight nibbles u (unpacked in registers) and the 32 signed activation codes q meet in
// vpmaddubsw (u8 × s8 → pairs summed in s16: at most 2·15·127, no saturation) and vpmaddwd (→ s32);
// the zero point comes off in integers (Σ (u − z)·q = Σ u·q − z·Σ q), and the exact block sum is
// scaled by d_w · d_x into an FP32 accumulator.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/quant/quantize_activations_q8.h"

namespace qjoule::kernels::detail {
namespace {

using quant::BlockQ8Act;
using quant::kQ8ActBlockSize;

template <class Block>
int zero_point(const Block& b) {
  if constexpr (std::is_same_v<Block, quant::BlockInt4Sym<Block::kSize>>) {
    return quant::kInt4SymZero;
  } else {
    return b.zero;
  }
}

// y[i, o] for i < MR rows of quantized activations (xa + i * nb32), o in [o_begin, o_end).
template <class Block, int MR>
QJOULE_TARGET_AVX2 void int4_s8_rows(const quant::BlockMatrix<Block>& w, const BlockQ8Act* xa, const float* bias,
                                     float* y, int64_t o_begin, int64_t o_end) {
  constexpr int G = Block::kSize, S = G / kQ8ActBlockSize;
  const int64_t N = w.rows, groups = w.blocks_per_row(), nb32 = w.padded_cols() / kQ8ActBlockSize;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t o = o_begin; o < o_end; ++o) {
    const Block* wb = w.row(o);
    __m256 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const float d = _cvtsh_ss(wb[g].d);
      const int z = zero_point(wb[g]);
      for (int s = 0; s < S; ++s) {
        __m128i lo, hi;
        avx2::unpack_nibbles32(wb[g].qs + 16 * s, lo, hi);
        const __m256i u = _mm256_set_m128i(hi, lo);
        for (int i = 0; i < MR; ++i) {
          const BlockQ8Act& a = xa[i * nb32 + g * S + s];
          const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
          __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(u, qa), ones);
          dot = _mm256_sub_epi32(dot, _mm256_setr_epi32(z * a.sum, 0, 0, 0, 0, 0, 0, 0));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * a.d), acc[i]);
        }
      }
    }
    for (int i = 0; i < MR; ++i) y[i * N + o] = avx2::hsum(acc[i]) + (bias != nullptr ? bias[o] : 0.0f);
  }
}

template <class Block>
QJOULE_TARGET_AVX2 void int4_s8_rows_dispatch(int64_t mr, const quant::BlockMatrix<Block>& w, const BlockQ8Act* xa,
                                              const float* bias, float* y, int64_t o_begin, int64_t o_end) {
  switch (mr) {
    case 1: int4_s8_rows<Block, 1>(w, xa, bias, y, o_begin, o_end); break;
    case 2: int4_s8_rows<Block, 2>(w, xa, bias, y, o_begin, o_end); break;
    case 3: int4_s8_rows<Block, 3>(w, xa, bias, y, o_begin, o_end); break;
    default: int4_s8_rows<Block, 4>(w, xa, bias, y, o_begin, o_end); break;
  }
}

}  // namespace

template <class Block>
void gemm_int4_s8_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                       std::string_view layer) {
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = K / kQ8ActBlockSize;
  if (m <= 0 || N <= 0) return;
  std::vector<BlockQ8Act> xq(static_cast<std::size_t>(m * nb32));
  quantize_rows_q8_act_avx2(x, m, K, xq.data(), layer);
  // Weight rows per work item: the chunk's packed rows stay in L1/L2 while every activation row passes.
  const int64_t chunk = m <= avx2::kDirectMaxRows ? 16 : 64;
  const int64_t chunks = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o_begin = c * chunk, o_end = std::min(N, o_begin + chunk);
    for (int64_t i0 = 0; i0 < m; i0 += avx2::kMr) {
      int4_s8_rows_dispatch(std::min<int64_t>(avx2::kMr, m - i0), w, xq.data() + i0 * nb32, bias, y + i0 * N, o_begin,
                            o_end);
    }
  }
}

template void gemm_int4_s8_avx2<quant::BlockInt4Sym<32>>(const quant::BlockMatrix<quant::BlockInt4Sym<32>>&,
                                                         const float*, const float*, int64_t, float*, std::string_view);
template void gemm_int4_s8_avx2<quant::BlockInt4Sym<64>>(const quant::BlockMatrix<quant::BlockInt4Sym<64>>&,
                                                         const float*, const float*, int64_t, float*, std::string_view);
template void gemm_int4_s8_avx2<quant::BlockInt4Sym<128>>(const quant::BlockMatrix<quant::BlockInt4Sym<128>>&,
                                                          const float*, const float*, int64_t, float*,
                                                          std::string_view);
template void gemm_int4_s8_avx2<quant::BlockInt4Asym<32>>(const quant::BlockMatrix<quant::BlockInt4Asym<32>>&,
                                                          const float*, const float*, int64_t, float*,
                                                          std::string_view);
template void gemm_int4_s8_avx2<quant::BlockInt4Asym<64>>(const quant::BlockMatrix<quant::BlockInt4Asym<64>>&,
                                                          const float*, const float*, int64_t, float*,
                                                          std::string_view);
template void gemm_int4_s8_avx2<quant::BlockInt4Asym<128>>(const quant::BlockMatrix<quant::BlockInt4Asym<128>>&,
                                                           const float*, const float*, int64_t, float*,
                                                           std::string_view);

}  // namespace qjoule::kernels::detail

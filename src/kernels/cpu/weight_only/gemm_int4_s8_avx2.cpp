// int4 weights × INT8 activations (W4A8): activations are quantized per row in blocks of 32
// (quant::BlockQ8Act, bit-identical to quant::quantize_row_q8_act_ref); for each 32-block the 32
// unsigned weight nibbles u (unpacked in registers) and the 32 signed activation codes q meet in
// vpmaddubsw (u8 × s8 → pairs summed in s16: at most 2·15·127, no saturation) and vpmaddwd (→ s32);
// the zero point comes off in integers (Σ (u − z)·q = Σ u·q − z·Σ q), and the exact block sum is
// scaled by d_w · d_x into an FP32 accumulator.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/weight_only_avx2.h"
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

// Quantizes one row; false when it holds a NaN/Inf (the caller reports it through the reference).
QJOULE_TARGET_AVX2 bool quantize_row_q8_act_avx2(const float* x, int64_t n, BlockQ8Act* y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int finite_mask = 0xFF;
  for (int64_t b = 0; b < n / kQ8ActBlockSize; ++b) {
    const float* xb = x + b * kQ8ActBlockSize;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
      finite_mask &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(v[j], v[j]), _mm256_setzero_ps(), _CMP_EQ_OQ));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!(id <= FLT_MAX)) id = 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], idv));  // round to nearest even (default MXCSR)
      q[j] = _mm256_min_epi32(_mm256_max_epi32(q[j], lo), hi);
      sum = _mm256_add_epi32(sum, q[j]);
    }
    const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), _mm256_permutevar8x32_epi32(p16, order));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    y[b].d = d;
    y[b].sum = _mm_cvtsi128_si32(s4);
  }
  return finite_mask == 0xFF;
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
  std::atomic<int64_t> bad_row{-1};
#pragma omp parallel for schedule(static) if (m >= 8)
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_row_q8_act_avx2(x + i * K, K, xq.data() + i * nb32)) {
      int64_t none = -1;
      bad_row.compare_exchange_strong(none, i);
    }
  }
  if (bad_row.load() >= 0) {  // let the reference name the layer, row and column
    const int64_t i = bad_row.load();
    quant::quantize_row_q8_act_ref(x + i * K, K, xq.data() + i * nb32, layer, i);
  }
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

// The scalar path of int4 × INT8 activations ("qjoule:scalar:int4_s8"): activations quantized with
// quant::quantize_row_q8_act_ref, then per 32-block an exact integer dot product Σ (u − z)·q, scaled
// by d_w · d_x into an FP32 accumulator — the same arithmetic as the AVX2 kernel, one value at a time.
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_activations_q8.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::kernels::detail {

template <class Block>
void gemm_int4_s8_scalar(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                         std::string_view layer) {
  constexpr int G = Block::kSize, S = G / quant::kQ8ActBlockSize;
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = K / quant::kQ8ActBlockSize;
  if (m <= 0 || N <= 0) return;
  std::vector<quant::BlockQ8Act> xq(static_cast<std::size_t>(m * nb32));
  for (int64_t i = 0; i < m; ++i) quant::quantize_row_q8_act_ref(x + i * K, K, xq.data() + i * nb32, layer, i);
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < N; ++o) {
    const Block* wb = w.row(o);
    for (int64_t i = 0; i < m; ++i) {
      const quant::BlockQ8Act* xa = xq.data() + i * nb32;
      float acc = 0.0f;
      for (int64_t g = 0; g < w.blocks_per_row(); ++g) {
        const float d = quant::fp16_bits_to_fp32(wb[g].d);
        int z = quant::kInt4SymZero;
        if constexpr (std::is_same_v<Block, quant::BlockInt4Asym<G>>) z = wb[g].zero;
        for (int s = 0; s < S; ++s) {
          const quant::BlockQ8Act& a = xa[g * S + s];
          int32_t dot = 0;
          for (int j = 0; j < quant::kQ8ActBlockSize; ++j) dot += quant::int4_nibble(wb[g].qs, s * 32 + j) * a.qs[j];
          acc += static_cast<float>(dot - z * a.sum) * (d * a.d);
        }
      }
      y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template void gemm_int4_s8_scalar<quant::BlockInt4Sym<32>>(const quant::BlockMatrix<quant::BlockInt4Sym<32>>&,
                                                           const float*, const float*, int64_t, float*,
                                                           std::string_view);
template void gemm_int4_s8_scalar<quant::BlockInt4Sym<64>>(const quant::BlockMatrix<quant::BlockInt4Sym<64>>&,
                                                           const float*, const float*, int64_t, float*,
                                                           std::string_view);
template void gemm_int4_s8_scalar<quant::BlockInt4Sym<128>>(const quant::BlockMatrix<quant::BlockInt4Sym<128>>&,
                                                            const float*, const float*, int64_t, float*,
                                                            std::string_view);
template void gemm_int4_s8_scalar<quant::BlockInt4Asym<32>>(const quant::BlockMatrix<quant::BlockInt4Asym<32>>&,
                                                            const float*, const float*, int64_t, float*,
                                                            std::string_view);
template void gemm_int4_s8_scalar<quant::BlockInt4Asym<64>>(const quant::BlockMatrix<quant::BlockInt4Asym<64>>&,
                                                            const float*, const float*, int64_t, float*,
                                                            std::string_view);
template void gemm_int4_s8_scalar<quant::BlockInt4Asym<128>>(const quant::BlockMatrix<quant::BlockInt4Asym<128>>&,
                                                             const float*, const float*, int64_t, float*,
                                                             std::string_view);

}  // namespace qjoule::kernels::detail

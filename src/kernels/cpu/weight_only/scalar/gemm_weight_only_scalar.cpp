// The scalar path of every weight-only format with FP32 activations (kernel paths "qjoule:scalar:..."):
// no SIMD intrinsics, runs on any x86-64. Each thread decodes one weight row at a time into a row
// buffer with the format's reference dequantizer and reuses it for every activation row; the weights
// stay packed in memory.
#include <cstddef>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/quant/quantize_fp16.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_int8.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::kernels::detail {
namespace {

// DequantRow: void(int64_t o, float* row) writes W[o, 0 .. K).
template <class DequantRow>
void run_scalar_gemm(int64_t N, int64_t K, const DequantRow& dequant_row, const float* bias, const float* x, int64_t m,
                     float* y) {
  if (m <= 0 || N <= 0) return;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<std::size_t>(K));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < N; ++o) {
      dequant_row(o, row.data());
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x + i * K;
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) acc += xi[k] * row[static_cast<std::size_t>(k)];
        y[i * N + o] = acc + (bias != nullptr ? bias[o] : 0.0f);
      }
    }
  }
}

}  // namespace

void gemm_fp16_f32_scalar(const quant::Fp16Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  run_scalar_gemm(
      w.rows, w.cols,
      [&w](int64_t o, float* row) { quant::dequantize_row_fp16_ref(w.bits.data() + o * w.cols, w.cols, row); }, bias, x,
      m, y);
}

void gemm_w8_f32_scalar(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  run_scalar_gemm(
      w.rows, w.cols,
      [&w](int64_t o, float* row) {
        quant::dequantize_row_int8_ref(w.q.data() + o * w.cols, w.scales[static_cast<std::size_t>(o)], w.cols, row);
      },
      bias, x, m, y);
}

template <class Block>
void gemm_int4_f32_scalar(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  constexpr int G = Block::kSize;
  run_scalar_gemm(
      w.rows, w.padded_cols(),
      [&w](int64_t o, float* row) {
        if constexpr (std::is_same_v<Block, quant::BlockInt4Sym<G>>) {
          quant::dequantize_row_int4_sym_ref<G>(w.row(o), w.padded_cols(), row);
        } else {
          quant::dequantize_row_int4_asym_ref<G>(w.row(o), w.padded_cols(), row);
        }
      },
      bias, x, m, y);
}

void gemm_nf4_f32_scalar(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  run_scalar_gemm(
      w.rows, w.padded_cols(),
      [&w](int64_t o, float* row) { quant::dequantize_row_nf4_ref(w.row(o), w.padded_cols(), row); }, bias, x, m, y);
}

void gemm_nf4dq_f32_scalar(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  run_scalar_gemm(
      w.rows, w.padded_cols(), [&w](int64_t o, float* row) { quant::dequantize_row_nf4_dq_ref(w, o, row); }, bias, x, m,
      y);
}

template <class Packed>
void gemm_fp4_f32_scalar(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  run_scalar_gemm(
      w.rows, w.padded_cols(),
      [&w](int64_t o, float* row) {
        if constexpr (std::is_same_v<Packed, quant::Mxfp4Matrix>) {
          quant::dequantize_row_mxfp4_ref(w.row(o), w.padded_cols(), row);
        } else {
          quant::dequantize_row_nvfp4_ref(w.row(o), w.padded_cols(), w.tensor_scale, row);
        }
      },
      bias, x, m, y);
}

template void gemm_fp4_f32_scalar<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                      float*);
template void gemm_fp4_f32_scalar<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                      float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Sym<32>>(const quant::BlockMatrix<quant::BlockInt4Sym<32>>&,
                                                            const float*, const float*, int64_t, float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Sym<64>>(const quant::BlockMatrix<quant::BlockInt4Sym<64>>&,
                                                            const float*, const float*, int64_t, float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Sym<128>>(const quant::BlockMatrix<quant::BlockInt4Sym<128>>&,
                                                             const float*, const float*, int64_t, float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Asym<32>>(const quant::BlockMatrix<quant::BlockInt4Asym<32>>&,
                                                             const float*, const float*, int64_t, float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Asym<64>>(const quant::BlockMatrix<quant::BlockInt4Asym<64>>&,
                                                             const float*, const float*, int64_t, float*);
template void gemm_int4_f32_scalar<quant::BlockInt4Asym<128>>(const quant::BlockMatrix<quant::BlockInt4Asym<128>>&,
                                                              const float*, const float*, int64_t, float*);

}  // namespace qjoule::kernels::detail

// The scalar reference twins of the weight-only linears: the quant:: reference quantizers and
// dequantizers, then dot products accumulated in double.
#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_activations_q8.h"
#include "qjoule/quant/quantize_fp16.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_int8.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::kernels {
namespace {

// y = x · Ŵᵀ + bias with Ŵ[o, :] written by dequant_row(o, row).
template <class DequantRow>
void dot_rows_ref(const float* x, int64_t m, int64_t out, int64_t in, const DequantRow& dequant_row, const float* bias,
                  float* y) {
  std::vector<float> row(static_cast<std::size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    dequant_row(o, row.data());
    for (int64_t i = 0; i < m; ++i) {
      double acc = bias != nullptr ? bias[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) acc += static_cast<double>(x[i * in + k]) * row[static_cast<std::size_t>(k)];
      y[i * out + o] = static_cast<float>(acc);
    }
  }
}

template <class Block>
void int4_f32_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                  const std::string& tensor, float* y) {
  constexpr int G = Block::kSize;
  const auto w = quant::quantize_matrix_int4<Block>(W, out, in, tensor);
  dot_rows_ref(
      x, m, out, in,
      [&w](int64_t o, float* row) {
        if constexpr (std::is_same_v<Block, quant::BlockInt4Sym<G>>) {
          quant::dequantize_row_int4_sym_ref<G>(w.row(o), w.cols, row);
        } else {
          quant::dequantize_row_int4_asym_ref<G>(w.row(o), w.cols, row);
        }
      },
      bias, y);
}

template <class Block>
void int4_s8_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                 const std::string& tensor, float* y) {
  constexpr int G = Block::kSize, S = G / quant::kQ8ActBlockSize;
  const auto w = quant::quantize_matrix_int4<Block>(W, out, in, tensor);
  // Activations zero-padded to the blocks' width (a partial last group: formats.h, "Any width").
  const int64_t K = w.padded_cols(), nb32 = K / quant::kQ8ActBlockSize;
  std::vector<float> xp(static_cast<std::size_t>(m * K), 0.0f);
  for (int64_t i = 0; i < m; ++i) std::copy(x + i * in, x + (i + 1) * in, xp.begin() + i * K);
  std::vector<quant::BlockQ8Act> xq(static_cast<std::size_t>(m * nb32));
  for (int64_t i = 0; i < m; ++i) quant::quantize_row_q8_act_ref(xp.data() + i * K, K, xq.data() + i * nb32, tensor, i);
  for (int64_t o = 0; o < out; ++o) {
    const Block* wb = w.row(o);
    for (int64_t i = 0; i < m; ++i) {
      double acc = bias != nullptr ? bias[o] : 0.0;
      for (int64_t g = 0; g < w.blocks_per_row(); ++g) {
        int z = quant::kInt4SymZero;
        if constexpr (std::is_same_v<Block, quant::BlockInt4Asym<G>>) z = wb[g].zero;
        const double d = quant::fp16_bits_to_fp32(wb[g].d);
        for (int s = 0; s < S; ++s) {
          const quant::BlockQ8Act& a = xq[static_cast<std::size_t>(i * nb32 + g * S + s)];
          int64_t dot = 0;
          for (int j = 0; j < quant::kQ8ActBlockSize; ++j) {
            dot += int64_t{quant::int4_nibble(wb[g].qs, s * 32 + j) - z} * a.qs[j];
          }
          acc += d * static_cast<double>(a.d) * static_cast<double>(dot);
        }
      }
      y[i * out + o] = static_cast<float>(acc);
    }
  }
}

template <int G>
void int4_ref_group(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                    const Int4Options& options, const std::string& tensor, float* y) {
  if (options.asymmetric) {
    using Block = quant::BlockInt4Asym<G>;
    if (options.int8_activations) return int4_s8_ref<Block>(x, m, W, bias, out, in, tensor, y);
    return int4_f32_ref<Block>(x, m, W, bias, out, in, tensor, y);
  }
  using Block = quant::BlockInt4Sym<G>;
  if (options.int8_activations) return int4_s8_ref<Block>(x, m, W, bias, out, in, tensor, y);
  return int4_f32_ref<Block>(x, m, W, bias, out, in, tensor, y);
}

}  // namespace

void linear_fp16_weights_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                             const std::string& tensor_name, float* y) {
  const auto w = quant::quantize_matrix_fp16(W, out, in, tensor_name);
  dot_rows_ref(
      x, m, out, in,
      [&w](int64_t o, float* row) { quant::dequantize_row_fp16_ref(w.bits.data() + o * w.cols, w.cols, row); }, bias,
      y);
}

void linear_w8_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                   const std::string& tensor_name, float* y) {
  const auto w = quant::quantize_matrix_int8(W, out, in, tensor_name);
  dot_rows_ref(
      x, m, out, in,
      [&w](int64_t o, float* row) {
        quant::dequantize_row_int8_ref(w.q.data() + o * w.cols, w.scales[static_cast<std::size_t>(o)], w.cols, row);
      },
      bias, y);
}

void linear_int4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                     const Int4Options& options, const std::string& tensor_name, float* y) {
  switch (options.group_size) {
    case 32: return int4_ref_group<32>(x, m, W, bias, out, in, options, tensor_name, y);
    case 64: return int4_ref_group<64>(x, m, W, bias, out, in, options, tensor_name, y);
    case 128: return int4_ref_group<128>(x, m, W, bias, out, in, options, tensor_name, y);
    default: fail("tensor '{}': int4 group size {}; expected 32, 64 or 128", tensor_name, options.group_size);
  }
}

void linear_nf4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                    const Nf4Options& options, const std::string& tensor_name, float* y) {
  if (options.double_quant) {
    const auto w = quant::quantize_matrix_nf4_double(W, out, in, tensor_name);
    dot_rows_ref(
        x, m, out, in, [&w](int64_t o, float* row) { quant::dequantize_row_nf4_dq_ref(w, o, row); }, bias, y);
    return;
  }
  const auto w = quant::quantize_matrix_nf4(W, out, in, tensor_name);
  dot_rows_ref(
      x, m, out, in, [&w](int64_t o, float* row) { quant::dequantize_row_nf4_ref(w.row(o), w.cols, row); }, bias, y);
}

void linear_mxfp4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                      const std::string& tensor_name, float* y) {
  const auto w = quant::quantize_matrix_mxfp4(W, out, in, tensor_name);
  dot_rows_ref(
      x, m, out, in, [&w](int64_t o, float* row) { quant::dequantize_row_mxfp4_ref(w.row(o), w.cols, row); }, bias, y);
}

void linear_nvfp4_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                      const std::string& tensor_name, float* y) {
  const auto w = quant::quantize_matrix_nvfp4(W, out, in, tensor_name);
  dot_rows_ref(
      x, m, out, in,
      [&w](int64_t o, float* row) { quant::dequantize_row_nvfp4_ref(w.row(o), w.cols, w.tensor_scale, row); }, bias, y);
}

}  // namespace qjoule::kernels

// quantize_matrix_int4_gptq: the layout is int4's own (every code decodes with the reference
// dequantizer), H diagonal gives round-to-nearest's bytes exactly (no error moves), and on correlated
// inputs the output error tr((W − Q) H (W − Q)ᵀ) falls well below RTN's, for every group size and
// scheme, with and without act-order; degenerate or broken inputs end in one line naming the tensor.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/quant/gptq.h"
#include "qjoule/quant/quantize_int4.h"
#include "calibration_inputs.h"

namespace {

using namespace qjoule;
using namespace qjoule::quant;
using calibration_test::correlated_inputs;
using calibration_test::gaussian;

template <class Block>
std::vector<float> dequantize(const BlockMatrix<Block>& m) {
  std::vector<float> out(size_t(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    if constexpr (std::is_same_v<Block, BlockInt4Asym<Block::kSize>>) {
      dequantize_row_int4_asym_ref<Block::kSize>(m.row(r), m.cols, out.data() + r * m.cols);
    } else {
      dequantize_row_int4_sym_ref<Block::kSize>(m.row(r), m.cols, out.data() + r * m.cols);
    }
  }
  return out;
}

template <class Block>
void expect_rtn_bytes_with_diagonal_h(int64_t rows, int64_t cols, bool act_order) {
  const auto w = gaussian(size_t(rows * cols), 7, 0.05f);
  std::vector<float> H(size_t(cols * cols), 0.0f);
  for (int64_t j = 0; j < cols; ++j) H[size_t(j * cols + j)] = 1.0f + float(j % 5);  // act-order permutes
  const auto gptq = quantize_matrix_int4_gptq<Block>(w.data(), rows, cols, H, {0.01, act_order, 128}, "t");
  const auto rtn = quantize_matrix_int4<Block>(w.data(), rows, cols, "t");
  ASSERT_EQ(gptq.blocks.size(), rtn.blocks.size());
  EXPECT_EQ(std::memcmp(gptq.blocks.data(), rtn.blocks.data(), rtn.bytes()), 0)
      << "G=" << Block::kSize << " cols=" << cols << " act_order=" << act_order;
}

TEST(Gptq, DiagonalHessianGivesRoundToNearestBytes) {
  for (bool act_order : {false, true}) {
    for (int64_t cols : {64, 200, 256}) {
      expect_rtn_bytes_with_diagonal_h<BlockInt4Sym<32>>(5, cols, act_order);
      expect_rtn_bytes_with_diagonal_h<BlockInt4Sym<128>>(5, cols, act_order);
      expect_rtn_bytes_with_diagonal_h<BlockInt4Asym<64>>(5, cols, act_order);
      expect_rtn_bytes_with_diagonal_h<BlockInt4Asym<128>>(5, cols, act_order);
    }
  }
}

template <class Block>
void expect_lower_output_error(int64_t rows, int64_t cols, bool act_order, double at_most) {
  const auto x = correlated_inputs(4 * cols, cols, 11);
  const auto w = gaussian(size_t(rows * cols), 12, 0.05f);
  std::vector<float> H;
  accumulate_hessian(x.data(), 4 * cols, cols, H);
  const auto gptq = dequantize(quantize_matrix_int4_gptq<Block>(w.data(), rows, cols, H, {0.01, act_order, 64}, "t"));
  const auto rtn = dequantize(quantize_matrix_int4<Block>(w.data(), rows, cols, "t"));
  const double e_gptq = relative_output_error(w.data(), gptq.data(), rows, cols, H);
  const double e_rtn = relative_output_error(w.data(), rtn.data(), rows, cols, H);
  ::testing::Test::RecordProperty(fmt::format("G{}{}_ratio", Block::kSize, act_order ? "_actorder" : ""),
                                  fmt::format("{:.4f}", e_gptq / e_rtn));
  EXPECT_LT(e_gptq, at_most * e_rtn) << "G=" << Block::kSize << " act_order=" << act_order << " gptq " << e_gptq
                                     << " rtn " << e_rtn;
}

TEST(Gptq, OutputErrorOnCorrelatedInputsIsWellBelowRoundToNearest) {
  for (bool act_order : {false, true}) {
    expect_lower_output_error<BlockInt4Sym<32>>(24, 160, act_order, 0.8);
    expect_lower_output_error<BlockInt4Sym<64>>(24, 192, act_order, 0.8);
    expect_lower_output_error<BlockInt4Sym<128>>(24, 256, act_order, 0.8);
    expect_lower_output_error<BlockInt4Asym<32>>(24, 160, act_order, 0.8);
    expect_lower_output_error<BlockInt4Asym<128>>(24, 300, act_order, 0.8);
  }
}

TEST(Gptq, ColumnsNoInputReachedAreZeros) {
  const int64_t rows = 3, cols = 64;
  const auto w = gaussian(size_t(rows * cols), 3, 0.05f);
  auto x = gaussian(size_t(200 * cols), 4, 1.0f);
  for (int64_t t = 0; t < 200; ++t) x[size_t(t * cols + 10)] = 0.0f;
  std::vector<float> H;
  accumulate_hessian(x.data(), 200, cols, H);
  const auto q = dequantize(quantize_matrix_int4_gptq<BlockInt4Sym<32>>(w.data(), rows, cols, H, {}, "t"));
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(q[size_t(r * cols + 10)], 0.0f);
}

TEST(Gptq, BadInputsAreOneLineNamingTheTensor) {
  const int64_t rows = 2, cols = 32;
  const auto w = gaussian(size_t(rows * cols), 5, 0.05f);
  std::vector<float> H(size_t(cols * cols), 0.0f);
  for (int64_t j = 0; j < cols; ++j) H[size_t(j * cols + j)] = 1.0f;
  auto nan_h = H;
  nan_h[3] = std::nanf("");
  const auto call = [&](std::vector<float> h, const std::vector<float>& weights) {
    return [h, &weights] {
      quantize_matrix_int4_gptq<BlockInt4Sym<32>>(weights.data(), 2, 32, h, {}, "model.layers.0.mlp.up_proj.weight");
    };
  };
  EXPECT_THAT(call(nan_h, w),
              ::testing::ThrowsMessage<Error>(::testing::AllOf(
                  ::testing::HasSubstr("model.layers.0.mlp.up_proj.weight"), ::testing::HasSubstr("Hessian holds nan"),
                  ::testing::Not(::testing::HasSubstr("\n")))));
  auto negative = H;  // not positive semi-definite: no damping rescues it
  negative[0] = -1e9f;
  EXPECT_THAT(call(negative, w), ::testing::ThrowsMessage<Error>(
                                     ::testing::AllOf(::testing::HasSubstr("model.layers.0.mlp.up_proj.weight"),
                                                      ::testing::HasSubstr("not positive definite"))));
  auto nan_w = w;
  nan_w[33] = std::nanf("");
  EXPECT_THAT(call(H, nan_w),
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("model.layers.0.mlp.up_proj.weight")));
  EXPECT_THAT(call(std::vector<float>(5, 1.0f), w),
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("expected 32 × 32")));
}

}  // namespace

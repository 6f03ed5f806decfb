// AWQ's searches (quant/awq.h): the round trip is round-to-nearest's codes decoded, the output error is
// tr((W − V) H (W − V)ᵀ) as a plain double loop computes it, the scales never raise the error above
// round-to-nearest's (α = 0 is on the grid) and lower it well where a few input channels are large, and
// clipping lowers each group's error where inputs are uncorrelated (then the groups' errors add up).
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>

#include "calibration_inputs.h"
#include "qjoule/error.h"
#include "qjoule/quant/awq.h"
#include "qjoule/quant/gptq.h"
#include "qjoule/quant/quantize_int4.h"

namespace {

using namespace qjoule;
using namespace qjoule::quant;
using calibration_test::correlated_inputs;
using calibration_test::gaussian;

template <class Block>
std::vector<float> round_trip(const std::vector<float>& w, int64_t rows, int64_t cols) {
  std::vector<float> out(w.size());
  int4_round_trip<Block>(w.data(), rows, cols, out.data(), "t");
  return out;
}

template <class Block>
void expect_round_trip_is_rtn(int64_t rows, int64_t cols) {
  const auto w = gaussian(size_t(rows * cols), 3, 0.05f);
  const auto m = quantize_matrix_int4<Block>(w.data(), rows, cols, "t");
  std::vector<float> want(w.size());
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (std::is_same_v<Block, BlockInt4Asym<Block::kSize>>) {
      dequantize_row_int4_asym_ref<Block::kSize>(m.row(r), cols, want.data() + r * cols);
    } else {
      dequantize_row_int4_sym_ref<Block::kSize>(m.row(r), cols, want.data() + r * cols);
    }
  }
  EXPECT_EQ(round_trip<Block>(w, rows, cols), want) << "G=" << Block::kSize << " cols=" << cols;
}

TEST(Awq, RoundTripIsRoundToNearestDecoded) {
  for (int64_t cols : {32, 100, 256}) {
    expect_round_trip_is_rtn<BlockInt4Sym<32>>(3, cols);
    expect_round_trip_is_rtn<BlockInt4Sym<128>>(3, cols);
    expect_round_trip_is_rtn<BlockInt4Asym<64>>(3, cols);
  }
}

TEST(Awq, OutputErrorIsTheQuadraticFormOfTheDifference) {
  const int64_t rows = 300, cols = 70;  // more rows than one chunk
  const auto x = correlated_inputs(2 * cols, cols, 5);
  std::vector<float> H;
  accumulate_hessian(x.data(), 2 * cols, cols, H);
  const auto w = gaussian(size_t(rows * cols), 6, 0.05f);
  const auto v = round_trip<BlockInt4Sym<32>>(w, rows, cols);
  double want = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const double h = H[size_t(std::max(i, j) * cols + std::min(i, j))];
        want += (double(w[size_t(r * cols + i)]) - v[size_t(r * cols + i)]) * h *
                (double(w[size_t(r * cols + j)]) - v[size_t(r * cols + j)]);
      }
  EXPECT_NEAR(output_error(w.data(), v.data(), rows, cols, H), want, 1e-4 * want);
}

// Inputs whose channels differ in size as a transformer's do: a few large, most small.
std::vector<float> uneven_inputs(int64_t tokens, int64_t cols, unsigned seed) {
  auto x = correlated_inputs(tokens, cols, seed);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < cols; ++k) x[size_t(t * cols + k)] *= (k % 13 == 0 ? 8.0f : 0.5f);
  return x;
}

template <class Block>
AwqScales scales_for(const std::vector<std::vector<float>>& weights, const std::vector<int64_t>& rows, int64_t cols,
                     const std::vector<float>& x, int64_t tokens, AwqOptions options = {}) {
  std::vector<float> H, mean_abs(size_t(cols), 0.0f);
  accumulate_hessian(x.data(), tokens, cols, H);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < cols; ++k) mean_abs[size_t(k)] += std::fabs(x[size_t(t * cols + k)]) / float(tokens);
  std::vector<AwqMember> members;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    members.push_back({weights[i].data(), rows[i], [](const float* w, int64_t r, int64_t c, float* out) {
                         int4_round_trip<Block>(w, r, c, out, "t");
                       }});
  }
  return search_awq_scales(members, cols, mean_abs, H, options);
}

TEST(Awq, ScalesLowerTheGroupsErrorWhereChannelsAreUneven) {
  const int64_t cols = 256, tokens = 512;
  const auto x = uneven_inputs(tokens, cols, 21);
  const std::vector<std::vector<float>> w = {gaussian(size_t(40 * cols), 22, 0.05f),
                                             gaussian(size_t(24 * cols), 23, 0.05f)};
  for (const auto& s : {scales_for<BlockInt4Sym<128>>(w, {40, 24}, cols, x, tokens),
                        scales_for<BlockInt4Asym<32>>(w, {40, 24}, cols, x, tokens)}) {
    EXPECT_GT(s.alpha, 0.0);
    EXPECT_LT(s.error, 0.8 * s.rtn_error);
    ASSERT_EQ(s.scales.size(), size_t(cols));
    EXPECT_GT(s.scales[0], s.scales[1]);  // a large channel's weights kept more exactly
  }
}

// Scales searched on 8 strided rows of 64 lower the error of all 64 (the error is a sum over rows).
TEST(Awq, ScalesSearchedOnStridedRowsLowerEveryRowsError) {
  const int64_t cols = 256, tokens = 512, rows = 64;
  const auto x = uneven_inputs(tokens, cols, 21);
  const auto w = gaussian(size_t(rows * cols), 22, 0.05f);
  AwqOptions few;
  few.search_rows = 8;
  const auto s = scales_for<BlockInt4Sym<128>>({w}, {rows}, cols, x, tokens, few);
  ASSERT_GT(s.alpha, 0.0);
  std::vector<float> H, scaled(w.size()), back(w.size());
  accumulate_hessian(x.data(), tokens, cols, H);
  for (std::size_t k = 0; k < w.size(); ++k) scaled[k] = w[k] * s.scales[k % size_t(cols)];
  int4_round_trip<BlockInt4Sym<128>>(scaled.data(), rows, cols, back.data(), "t");
  for (std::size_t k = 0; k < w.size(); ++k) back[k] /= s.scales[k % size_t(cols)];
  const double all_rows = output_error(w.data(), back.data(), rows, cols, H);
  const double rtn = output_error(w.data(), round_trip<BlockInt4Sym<128>>(w, rows, cols).data(), rows, cols, H);
  EXPECT_LT(all_rows, 0.8 * rtn);
}

TEST(Awq, EvenChannelsKeepRoundToNearest) {
  const int64_t cols = 128, tokens = 256;
  std::vector<float> x(size_t(tokens * cols), 1.0f);  // every channel alike: every α gives s = 1
  for (std::size_t i = 0; i < x.size(); i += 2) x[i] = -1.0f;
  const std::vector<std::vector<float>> w = {gaussian(size_t(8 * cols), 2, 0.05f)};
  const auto s = scales_for<BlockInt4Sym<32>>(w, {8}, cols, x, tokens);
  EXPECT_EQ(s.alpha, 0.0);
  EXPECT_EQ(s.error, s.rtn_error);
  for (float v : s.scales) EXPECT_FLOAT_EQ(v, 1.0f);
}

template <class Block>
void expect_clipping_lowers_error(int64_t rows, int64_t cols) {
  std::vector<float> H(size_t(cols * cols), 0.0f);  // uncorrelated inputs: the groups' errors add up
  for (int64_t j = 0; j < cols; ++j) H[size_t(j * cols + j)] = 1.0f + float(j % 7);
  auto w = gaussian(size_t(rows * cols), 9, 0.05f);
  for (std::size_t i = 0; i < w.size(); i += 37) w[i] *= 6.0f;  // outliers that stretch their group's scale
  const double before = output_error(w.data(), round_trip<Block>(w, rows, cols).data(), rows, cols, H);
  auto clipped = w;
  clip_awq<Block>(clipped.data(), rows, cols, H, {}, "t");
  const double after = output_error(w.data(), round_trip<Block>(clipped, rows, cols).data(), rows, cols, H);
  EXPECT_LT(after, before) << "G=" << Block::kSize << " cols=" << cols;
  for (std::size_t i = 0; i < w.size(); ++i) ASSERT_LE(std::fabs(clipped[i]), std::fabs(w[i]));
}

TEST(Awq, ClippingLowersTheErrorOnOddWidths) {
  expect_clipping_lowers_error<BlockInt4Sym<32>>(16, 200);
  expect_clipping_lowers_error<BlockInt4Sym<128>>(16, 300);
  expect_clipping_lowers_error<BlockInt4Asym<64>>(16, 200);
}

// Inputs with a large shared mean (LayerNorm's β): H's off-diagonal blocks couple a row's groups, so the
// groups' own clipping can raise the row's whole error; no row may end above round-to-nearest's.
TEST(Awq, NoRowEndsAboveRoundToNearestWhereInputsShareAMean) {
  using Block = BlockInt4Asym<32>;
  const int64_t rows = 24, cols = 128, tokens = 512;
  auto x = gaussian(size_t(tokens * cols), 5, 0.3f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < cols; ++j) x[size_t(t * cols + j)] += 2.0f;
  std::vector<float> H(size_t(cols * cols), 0.0f);
  accumulate_hessian(x.data(), tokens, cols, H);
  auto w = gaussian(size_t(rows * cols), 9, 0.05f);
  for (std::size_t i = 0; i < w.size(); i += 37) w[i] *= 6.0f;
  auto clipped = w;
  clip_awq<Block>(clipped.data(), rows, cols, H, {}, "t");
  const auto rtn = round_trip<Block>(w, rows, cols), after = round_trip<Block>(clipped, rows, cols);
  int kept = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::size_t at = size_t(r * cols);
    const double e_rtn = output_error(w.data() + at, rtn.data() + at, 1, cols, H);
    const double e_awq = output_error(w.data() + at, after.data() + at, 1, cols, H);
    EXPECT_LE(e_awq, e_rtn * (1.0 + 1e-6)) << "row " << r;
    kept += std::memcmp(clipped.data() + at, w.data() + at, cols * sizeof(float)) != 0;
  }
  EXPECT_GT(kept, 0) << "some rows keep their clipping";
}

TEST(Awq, MismatchedStatisticsAreOneLine) {
  const std::vector<float> w(64, 0.1f), H(32 * 32, 0.0f), mean_abs(31, 1.0f);
  std::vector<AwqMember> members{{w.data(), 2, [](const float*, int64_t, int64_t, float*) {}}};
  EXPECT_THAT([&] { search_awq_scales(members, 32, mean_abs, H); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("31 channel means"),
                                                               ::testing::Not(::testing::HasSubstr("\n")))));
}

}  // namespace

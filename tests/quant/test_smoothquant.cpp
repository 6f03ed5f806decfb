// SmoothQuant math on tiny hand-computed cases, and the invariance X·Wᵀ = (X/s)·(W·s)ᵀ.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/quant/smoothquant.h"

namespace {

using namespace qjoule::quant;

TEST(SmoothQuant, ScalesByHand) {
  // alpha 0.5: s = sqrt(a) / sqrt(w).  a = 16, w = 4 → 2;  a = 1, w = 9 → 1/3.
  // alpha 1: s = a.  alpha 0: s = 1 / w.
  const std::vector<float> a = {16.0f, 1.0f}, w = {4.0f, 9.0f};
  const auto half = smoothquant_scales(a, w, 0.5f);
  EXPECT_FLOAT_EQ(half[0], 2.0f);
  EXPECT_FLOAT_EQ(half[1], 1.0f / 3.0f);
  const auto one = smoothquant_scales(a, w, 1.0f);
  EXPECT_FLOAT_EQ(one[0], 16.0f);
  EXPECT_FLOAT_EQ(one[1], 1.0f);
  const auto zero = smoothquant_scales(a, w, 0.0f);
  EXPECT_FLOAT_EQ(zero[0], 0.25f);
  EXPECT_FLOAT_EQ(zero[1], 1.0f / 9.0f);
  // alpha 0.75 with a = 16, w = 16: 16^0.75 / 16^0.25 = 8 / 2 = 4.
  EXPECT_FLOAT_EQ(smoothquant_scales({16.0f}, {16.0f}, 0.75f)[0], 4.0f);
}

TEST(SmoothQuant, GuardsZerosAndClamps) {
  const auto s = smoothquant_scales({0.0f, 5.0f, 1e12f, 1e-12f}, {3.0f, 0.0f, 1e-12f, 1e12f}, 0.5f);
  EXPECT_EQ(s[0], 1.0f) << "no activation seen: leave the channel alone";
  EXPECT_EQ(s[1], 1.0f) << "all-zero weight column: leave the channel alone";
  EXPECT_EQ(s[2], kSmoothMax);
  EXPECT_EQ(s[3], kSmoothMin);
}

TEST(SmoothQuant, RejectsBadInputsWithOneLine) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const qjoule::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([] { smoothquant_scales({1.0f}, {1.0f}, 1.5f); }).find("alpha 1.5"), std::string::npos);
  EXPECT_NE(message([] {
              smoothquant_scales({1.0f}, {1.0f, 2.0f}, 0.5f);
            }).find("1 activation maxima but 2"),
            std::string::npos);
  EXPECT_NE(message([] {
              smoothquant_scales({std::numeric_limits<float>::quiet_NaN()}, {1.0f}, 0.5f);
            }).find("activation abs-max [0]"),
            std::string::npos);
  EXPECT_NE(message([] { smoothquant_scales({1.0f}, {-1.0f}, 0.5f); }).find("weight abs-max [0]"), std::string::npos);
}

TEST(SmoothQuant, SharedInputTakesTheMaxOverQkv) {
  // Three linears [2 out, 3 in] sharing one input: the column maxima are taken over all of them.
  const std::vector<float> q = {1, -2, 0, 0, 1, 0}, k = {-3, 0, 0, 0, 0, 0.5f}, v = {0, 0, 0, 0, 4, 0};
  std::vector<float> wmax;
  accumulate_weight_input_absmax(q.data(), 2, 3, wmax);
  accumulate_weight_input_absmax(k.data(), 2, 3, wmax);
  accumulate_weight_input_absmax(v.data(), 2, 3, wmax);
  EXPECT_EQ(wmax, (std::vector<float>{3.0f, 4.0f, 0.5f}));
  std::vector<float> amax;
  const std::vector<float> x1 = {1, -8, 0.5f}, x2 = {-2, 1, 0};
  accumulate_channel_absmax(x1.data(), 1, 3, amax);
  accumulate_channel_absmax(x2.data(), 1, 3, amax);
  EXPECT_EQ(amax, (std::vector<float>{2.0f, 8.0f, 0.5f}));
  const std::vector<float> wrong(4, 1.0f);
  EXPECT_THROW(accumulate_channel_absmax(wrong.data(), 1, 4, amax), qjoule::Error);
}

TEST(SmoothQuant, FoldingPreservesTheProduct) {
  // LayerNorm output x = n·gamma + beta feeding W [2, 3]; fold 1/s into gamma/beta and s into W.
  const std::vector<float> n = {0.5f, -1.0f, 2.0f};
  std::vector<float> gamma = {1.0f, 2.0f, 0.5f}, beta = {0.1f, -0.2f, 0.3f};
  std::vector<float> W = {1, 2, 3, -1, 0.5f, 4};
  auto product = [&](const std::vector<float>& g, const std::vector<float>& b, const std::vector<float>& w) {
    std::vector<float> y(2, 0.0f);
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) y[size_t(j)] += (n[size_t(k)] * g[size_t(k)] + b[size_t(k)]) * w[size_t(j * 3 + k)];
    return y;
  };
  const auto before = product(gamma, beta, W);
  const std::vector<float> s = {2.0f, 0.25f, 4.0f};
  fold_smoothing_into_layernorm(gamma.data(), beta.data(), s);
  scale_linear_input_columns(W.data(), 2, 3, s);
  EXPECT_EQ(gamma, (std::vector<float>{0.5f, 8.0f, 0.125f}));
  EXPECT_EQ(beta, (std::vector<float>{0.05f, -0.8f, 0.075f}));
  EXPECT_EQ(W, (std::vector<float>{2, 0.5f, 12, -2, 0.125f, 16}));
  const auto after = product(gamma, beta, W);
  for (size_t j = 0; j < 2; ++j) EXPECT_NEAR(after[j], before[j], 1e-6f);
  EXPECT_THROW(scale_linear_input_columns(W.data(), 2, 3, {1.0f, 2.0f}), qjoule::Error);
}

}  // namespace

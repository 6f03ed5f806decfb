// A classifier's AWQ changes kept only where its logits come closer to FP32's
// (model/calibration/awq_classifier_choice.h), on a one-Linear "classifier" whose logits are the Linear's outputs: AWQ's
// change here doubles the weights. Against logits of the doubled weights the change is kept (AWQ's codes in
// the result, the Linear running them); against the original weights' it is dropped (round-to-nearest's
// codes of the original weights, bit for bit, with the original bias). And the KL itself.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "model/calibration/awq_classifier_choice.h"
#include "qjoule/error.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "started_calibrating_linear.h"
#include "qjoule/quant/awq.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/quantize_int4.h"

namespace {

using namespace qjoule;
using model::LinearParams;
using model::detail::CalibratingLinear;
using ::testing::HasSubstr;

constexpr int64_t kIn = 64, kOut = 8, kExamples = 6;

LinearParams weights() {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.1f);
  LinearParams p;
  p.name = "block.0.attention.v_lin", p.out_features = kOut, p.in_features = kIn;
  p.weight.resize(size_t(kOut * kIn));
  for (float& w : p.weight) w = d(rng);
  p.bias.assign(size_t(kOut), 0.25f);
  return p;
}

std::vector<std::vector<float>> examples() {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<float>> x(kExamples, std::vector<float>(size_t(kIn)));
  for (auto& row : x)
    for (float& v : row) v = d(rng);
  return x;
}

// FP32 outputs of w (and the bias) on every example.
std::vector<std::vector<float>> fp32_logits(const std::vector<float>& w, const std::vector<float>& bias) {
  std::vector<std::vector<float>> out;
  for (const auto& x : examples()) {
    out.emplace_back(size_t(kOut));
    kernels::linear_f32_ref(x.data(), 1, w.data(), bias.data(), kOut, kIn, out.back().data());
  }
  return out;
}

struct Choice {
  LinearParams original = weights();
  std::unique_ptr<CalibratingLinear> v;
  model::CalibratedInt4 out;
  model::detail::AwqChoice choice;

  // AWQ's change (the weights doubled), then the choice against `reference`.
  explicit Choice(const std::vector<std::vector<float>>& reference) {
    v = test::started_calibrating_linear(original, "int4:g=32:sym:awq");
    v->keep_round_to_nearest_alternative();
    for (float& w : v->weight()) w *= 2.0f;
    v->finish_round_to_nearest(out);
    const auto x = examples();
    choice = model::detail::keep_awq_where_the_logits_come_closer(
        {{v.get()}}, reference, [&](std::size_t i, float* y) { v->forward(x[i].data(), 1, y); }, out);
  }
};

std::vector<float> doubled(std::vector<float> w) {
  for (float& v : w) v *= 2.0f;
  return w;
}

TEST(AwqClassifierChoice, KeepsAChangeThatBringsTheLogitsCloser) {
  const LinearParams p = weights();
  Choice c(fp32_logits(doubled(p.weight), p.bias));
  EXPECT_EQ(c.choice.units, 1);
  EXPECT_EQ(c.choice.kept, 1);
  EXPECT_LT(c.choice.kl, c.choice.rtn_kl);
  EXPECT_FALSE(c.v->runs_round_to_nearest());
  const auto awq = quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(doubled(p.weight).data(), kOut, kIn, "t");
  const auto& kept = std::get<quant::BlockMatrix<quant::BlockInt4Sym<32>>>(c.out.codes.at(p.name));
  ASSERT_EQ(kept.bytes(), awq.bytes());
  EXPECT_EQ(std::memcmp(kept.blocks.data(), awq.blocks.data(), awq.bytes()), 0) << "AWQ's codes";
}

TEST(AwqClassifierChoice, DropsAChangeThatTakesTheLogitsFurther) {
  const LinearParams p = weights();
  Choice c(fp32_logits(p.weight, p.bias));
  EXPECT_EQ(c.choice.kept, 0);
  EXPECT_EQ(c.choice.kl, c.choice.rtn_kl);
  EXPECT_TRUE(c.v->runs_round_to_nearest());
  const auto rtn = quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(p.weight.data(), kOut, kIn, "t");
  const auto& kept = std::get<quant::BlockMatrix<quant::BlockInt4Sym<32>>>(c.out.codes.at(p.name));
  ASSERT_EQ(kept.bytes(), rtn.bytes());
  EXPECT_EQ(std::memcmp(kept.blocks.data(), rtn.blocks.data(), rtn.bytes()), 0) << "round-to-nearest's codes";
  EXPECT_EQ(c.out.biases.at(p.name), p.bias);
  // The Linear runs those codes: bit for bit what the int4 Linear of them (and the original bias) gives, the
  // kernel this process chose for int4 either way (its decode GEMV is chosen by measurement).
  const auto n = static_cast<std::size_t>(kOut);
  std::vector<float> y(n), want(n);
  const auto own = kernels::make_linear_int4_packed(rtn, p.bias.data(), p.name);
  const auto x = examples();
  c.v->forward(x[0].data(), 1, y.data());
  own->forward(x[0].data(), 1, want.data());
  EXPECT_EQ(y, want);
}

TEST(AwqClassifierChoice, ALinearWithoutTheAlternativeSaysSo) {
  auto v = test::started_calibrating_linear(weights(), "int4:g=32:sym:awq");
  model::CalibratedInt4 out;
  v->finish_round_to_nearest(out);
  EXPECT_THAT([&] { v->run_round_to_nearest(true); },
              ::testing::ThrowsMessage<Error>(HasSubstr("block.0.attention.v_lin: no round-to-nearest alternative")));
  EXPECT_THAT([&] { v->take_round_to_nearest(out); },
              ::testing::ThrowsMessage<Error>(HasSubstr("block.0.attention.v_lin: no round-to-nearest alternative")));
  EXPECT_THAT([&] { v->keep_round_to_nearest_alternative(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no weights to keep round-to-nearest's codes of")));
}

TEST(AwqClassifierChoice, MeanLogitKl) {
  const std::vector<std::vector<float>> a = {{1.0f, 2.0f}, {0.0f, 0.0f}}, b = {{1.0f, 2.0f}, {0.0f, 1.0f}};
  EXPECT_EQ(model::detail::mean_logit_kl(a, a), 0.0);
  // KL(½, ½ ‖ softmax(0, 1)) = log 2 − ½ log(e^0 / z) − ½ log(e^1 / z) with z = 1 + e, halved by the mean.
  const double z = 1.0 + std::exp(1.0);
  const double want = 0.5 * (0.5 * std::log(0.5 * z) + 0.5 * std::log(0.5 * z / std::exp(1.0)));
  EXPECT_NEAR(model::detail::mean_logit_kl(a, b), want, 1e-12);
  EXPECT_THAT(
      [&] {
        model::detail::mean_logit_kl(a, {{1.0f, 2.0f}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("2 reference rows and 1 rows")));
  EXPECT_THAT(
      [&] {
        model::detail::mean_logit_kl(a, {{1.0f, 2.0f}, {0.0f}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("row 1 has 2 and 1 logits")));
}

}  // namespace

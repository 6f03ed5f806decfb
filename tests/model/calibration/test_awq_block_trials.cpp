// AWQ's clipping chosen by the block's output (model/calibration/awq_block_trials.h), on a one-Linear "block": a
// clipping is kept where it brings the block's output closer to the unquantized block's on the
// calibration inputs, dropped (the weights exactly as they were) where the block does not improve, and
// the Linear runs its own weights again afterwards.
#include <gmock/gmock.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "model/calibration/awq_block_trials.h"
#include "qjoule/kernels/linear.h"
#include "started_calibrating_linear.h"
#include "qjoule/quant/format_spec.h"

namespace {

using namespace qjoule;
using model::LinearParams;
using model::detail::CalibratingLinear;

constexpr int64_t kHidden = 64, kTokens = 48;

// Weights with heavy tails (one in 16 is 8x the rest), where clipping wins at 4 bits.
LinearParams heavy_tailed(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.05f);
  LinearParams p;
  p.name = "block.v", p.out_features = kHidden, p.in_features = kHidden;
  p.weight.resize(size_t(kHidden * kHidden));
  for (std::size_t i = 0; i < p.weight.size(); ++i) p.weight[i] = d(rng) * (i % 16 == 5 ? 8.0f : 1.0f);
  p.bias.assign(size_t(kHidden), 0.1f);
  return p;
}

std::vector<std::vector<float>> inputs(unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<float>> states(3, std::vector<float>(size_t(kTokens * kHidden)));
  for (auto& s : states)
    for (auto& x : s) x = d(rng);
  return states;
}

struct OneLinearBlock {
  LinearParams original = heavy_tailed(7);
  std::unique_ptr<CalibratingLinear> v;
  std::map<std::string, CalibratingLinear*> here;
  model::detail::AwqBlock roles;
  std::vector<std::vector<float>> states = inputs(11);

  OneLinearBlock() {
    v = test::started_calibrating_linear(original, "int4:g=32:sym:awq");
    std::vector<float> y(size_t(kTokens * kHidden));
    for (const auto& x : states) v->forward(x.data(), kTokens, y.data());  // the recording pass
    here[original.name] = v.get();
    roles.v = v.get();
  }
};

// Σ ‖w's outputs − the original weights' outputs‖² over the states, w rounded to int4:g=32:sym.
double output_error_of(const OneLinearBlock& b, const std::vector<float>& w) {
  std::vector<float> trip(w.size());
  quant::int4_round_trip<quant::BlockInt4Sym<32>>(w.data(), kHidden, kHidden, trip.data(), "block.v");
  double sum = 0.0;
  std::vector<float> y(size_t(kTokens * kHidden)), want(y.size());
  for (const auto& x : b.states) {
    kernels::linear_f32_ref(x.data(), kTokens, trip.data(), b.original.bias.data(), kHidden, kHidden, y.data());
    kernels::linear_f32_ref(x.data(), kTokens, b.original.weight.data(), b.original.bias.data(), kHidden, kHidden,
                            want.data());
    for (std::size_t i = 0; i < y.size(); ++i) sum += (double(y[i]) - want[i]) * (double(y[i]) - want[i]);
  }
  return sum;
}

// Runs the trials on b's block: its output is v's (uses_linear) or its input unchanged.
void choose(OneLinearBlock& b, bool uses_linear) {
  CalibratingLinear& v = *b.v;
  model::detail::choose_awq_clipping_by_block_output(
      b.roles, b.here, b.states, kHidden,
      [&](float* x, int64_t tokens) {
        std::vector<float> y(size_t(tokens * kHidden));
        v.forward(x, tokens, y.data());
        if (uses_linear) std::copy(y.begin(), y.end(), x);
      },
      quant::AwqOptions{});
}

TEST(AwqBlockTrials, KeepsAClippingThatBringsTheBlocksOutputCloser) {
  OneLinearBlock b;
  choose(b, /*uses_linear=*/true);
  CalibratingLinear& v = *b.v;
  ASSERT_NE(v.weight(), b.original.weight) << "heavy-tailed weights: clipping should win here";
  EXPECT_LT(output_error_of(b, v.weight()), output_error_of(b, b.original.weight));
  // Recording again, on its own (clipped, unrounded) weights.
  std::vector<float> y(size_t(kTokens * kHidden)), want(y.size());
  v.forward(b.states[0].data(), kTokens, y.data());
  kernels::linear_f32_ref(b.states[0].data(), kTokens, v.weight().data(), b.original.bias.data(), kHidden, kHidden,
                          want.data());
  for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 1e-4f) << i;
}

TEST(AwqBlockTrials, DropsAClippingWhereTheBlocksOutputDoesNotImprove) {
  OneLinearBlock b;
  choose(b, /*uses_linear=*/false);  // no clipping can lower the error of a block that ignores the Linear
  EXPECT_EQ(b.v->weight(), b.original.weight);
}

}  // namespace

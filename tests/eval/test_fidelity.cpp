// compare_logits: agreement, KL and max |Δlogit| on hand-computed cases; mismatched shapes fail.
#include "qjoule/eval/fidelity.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"

namespace qjoule::eval {
namespace {

TEST(Fidelity, IdenticalLogitsAgreeFully) {
  const std::vector<std::vector<float>> a{{1.0f, 2.0f}, {3.0f, -1.0f}};
  const auto f = compare_logits(a, a);
  EXPECT_EQ(f.examples, 2u);
  EXPECT_EQ(f.top1_agree, 2u);
  EXPECT_DOUBLE_EQ(f.top1_agreement, 1.0);
  EXPECT_DOUBLE_EQ(f.mean_kl, 0.0);
  EXPECT_DOUBLE_EQ(f.max_abs_dlogit, 0.0);
}

TEST(Fidelity, HandComputedKlAndFlip) {
  // Example 0: p = softmax(0, 0) = (1/2, 1/2), q = softmax(0, ln 3) = (1/4, 3/4):
  // KL = 1/2 ln(2) + 1/2 ln(2/3). Example 1 identical. Argmax of example 0 changes (tie -> 0 vs 1).
  const float ln3 = std::log(3.0f);
  const std::vector<std::vector<float>> ref{{0.0f, 0.0f}, {5.0f, 1.0f}};
  const std::vector<std::vector<float>> run{{0.0f, ln3}, {5.0f, 1.0f}};
  const auto f = compare_logits(ref, run);
  const double kl0 = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
  EXPECT_NEAR(f.mean_kl, kl0 / 2.0, 1e-6);
  EXPECT_EQ(f.top1_agree, 1u);
  EXPECT_DOUBLE_EQ(f.top1_agreement, 0.5);
  EXPECT_NEAR(f.max_abs_dlogit, ln3, 1e-6);
}

TEST(Fidelity, LargeLogitsStayFinite) {
  const auto f = compare_logits({{1000.0f, -1000.0f}}, {{999.0f, -1000.0f}});
  EXPECT_TRUE(std::isfinite(f.mean_kl));
  EXPECT_GE(f.mean_kl, 0.0);
}

TEST(Fidelity, MismatchedShapesNameBoth) {
  try {
    compare_logits({{1.0f, 2.0f}}, {{1.0f, 2.0f}, {0.0f, 0.0f}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("the reference has 1 examples and the run 2"));
  }
  try {
    compare_logits({{1.0f, 2.0f}}, {{1.0f, 2.0f, 3.0f}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("example 0 has 2 reference logits and 3 run logits"));
  }
}

// A NaN or Inf in either side's logits ends the comparison with one line naming the example and the
// logit: never an agreement or KL computed from them (the same check guards accuracy and perplexity).
TEST(Fidelity, NonFiniteLogitsAreAnErrorNotAScore) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const auto message = [](const std::vector<std::vector<float>>& ref, const std::vector<std::vector<float>>& run) {
    try {
      compare_logits(ref, run);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message({{1.0f, 2.0f}, {1.0f, 2.0f}}, {{1.0f, 2.0f}, {0.5f, nan}}),
              ::testing::HasSubstr("fidelity, example 1: the model's logit 1 is NaN; no fidelity is computed from "
                                   "non-finite outputs"));
  EXPECT_THAT(message({{-inf, 2.0f}}, {{1.0f, 2.0f}}),
              ::testing::HasSubstr("fidelity, example 0 (FP32 reference): the model's logit 0 is -Inf"));
}

}  // namespace
}  // namespace qjoule::eval

// route_top_k against transformers' routers: softmax over every expert, the top k, renormalised or not.
#include <cmath>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/model/moe_routing.h"

namespace {

using qjoule::model::route_top_k;

TEST(MoeRouting, TopKOfTheSoftmaxRenormalisedAsMixtralDoes) {
  // Token 0 prefers experts 2 then 0; token 1 experts 1 then 3.
  const std::vector<float> logits{1.0f, -1.0f, 2.0f, 0.0f, /**/ 0.0f, 3.0f, -2.0f, 1.0f};
  const auto routes = route_top_k(logits, 2, 4, 2, true);
  ASSERT_EQ(routes.size(), 4u);
  ASSERT_EQ(routes[0].size(), 1u);
  ASSERT_EQ(routes[2].size(), 1u);
  EXPECT_EQ(routes[2][0].token, 0);
  // Renormalised over the two chosen: e^2 / (e^2 + e^1).
  EXPECT_NEAR(routes[2][0].weight, std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(routes[0][0].weight + routes[2][0].weight, 1.0, 1e-6);
  ASSERT_EQ(routes[1].size(), 1u);
  EXPECT_EQ(routes[1][0].token, 1);
  EXPECT_EQ(routes[3][0].token, 1);
}

TEST(MoeRouting, WithoutNormalisingTheWeightsAreTheSoftmaxOverEveryExpert) {
  const std::vector<float> logits{1.0f, -1.0f, 2.0f, 0.0f};
  const auto routes = route_top_k(logits, 1, 4, 2, false);
  const double z = std::exp(1.0) + std::exp(-1.0) + std::exp(2.0) + std::exp(0.0);
  EXPECT_NEAR(routes[2][0].weight, std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(routes[0][0].weight, std::exp(1.0) / z, 1e-6);
  EXPECT_TRUE(routes[1].empty() && routes[3].empty());
}

TEST(MoeRouting, ATieGoesToTheLowerExpertAndANanIsNeverPreferred) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto tie = route_top_k(std::vector<float>{0.5f, 0.5f, 0.5f}, 1, 3, 1, true);
  EXPECT_EQ(tie[0].size(), 1u);
  EXPECT_FLOAT_EQ(tie[0][0].weight, 1.0f);
  // A NaN logit makes every probability NaN: the first k experts, with NaN weights, so the output says NaN.
  const auto poisoned = route_top_k(std::vector<float>{0.0f, nan, 1.0f}, 1, 3, 2, true);
  ASSERT_EQ(poisoned[0].size(), 1u);
  ASSERT_EQ(poisoned[1].size(), 1u);
  EXPECT_TRUE(std::isnan(poisoned[0][0].weight));
}

TEST(MoeRouting, ShapesThatDoNotAddUpAreOneLine) {
  EXPECT_THAT(qjoule::test::error_of([] { route_top_k(std::vector<float>(8), 2, 4, 5, true); }),
              ::testing::HasSubstr("top-5"));
  EXPECT_THAT(qjoule::test::error_of([] { route_top_k(std::vector<float>(7), 2, 4, 2, true); }),
              ::testing::HasSubstr("7 logits for 2 tokens × 4 experts"));
}

}  // namespace

// Run-time INT8 activation blocks of the int4_s8 path (formats.h "q8 activation blocks").
// Budget: |x − q·d| <= d / 2 (+ 1 ulp); sum exact; zero block → d = 0, q = 0.
#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/quant/quantize_activations_q8.h"

namespace {

using namespace qjoule::quant;

TEST(QuantizeActivationsQ8, RoundTripSumAndZeroBlock) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(32 * 4);
  for (auto& v : x) v = dist(rng);
  for (int i = 64; i < 96; ++i) x[static_cast<size_t>(i)] = 0.0f;
  std::vector<BlockQ8Act> b(4);
  quantize_row_q8_act_ref(x.data(), 128, b.data(), "l", 0);
  for (size_t j = 0; j < 4; ++j) {
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      sum += b[j].qs[i];
      ASSERT_LE(std::fabs(x[j * 32 + static_cast<size_t>(i)] - b[j].qs[i] * b[j].d), b[j].d * 0.5f * 1.0001f);
    }
    EXPECT_EQ(b[j].sum, sum);
  }
  EXPECT_EQ(b[2].d, 0.0f);
  EXPECT_EQ(b[2].sum, 0);
}

TEST(QuantizeActivationsQ8, NonFiniteActivationNamesTheLayer) {
  std::vector<float> x(64, 1.0f);
  x[40] = std::nanf("");
  std::vector<BlockQ8Act> b(2);
  EXPECT_THAT([&] { quantize_row_q8_act_ref(x.data(), 64, b.data(), "enc.0.ffn.lin2", 3); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("enc.0.ffn.lin2"), ::testing::HasSubstr("[3, 40]"))));
}

}  // namespace

// INT8 per-output-channel symmetric quantization (formats.h "int8 / w8").
// Budget: round trip |x − q·scale| <= scale / 2 (+ 1 ulp); ±max, zeros encode exactly.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/quant/quantize_int8.h"
#include "random_data.h"

namespace {

using namespace qjoule::quant;

std::vector<float> round_trip(const std::vector<float>& x, float* scale_out = nullptr) {
  std::vector<int8_t> q(x.size());
  const float scale = quantize_row_int8_ref(x.data(), static_cast<int64_t>(x.size()), q.data(), "t", 0);
  std::vector<float> y(x.size());
  dequantize_row_int8_ref(q.data(), scale, static_cast<int64_t>(x.size()), y.data());
  if (scale_out != nullptr) *scale_out = scale;
  return y;
}

TEST(QuantizeInt8, RoundTripWithinHalfAStep) {
  const auto x = qjoule::test::random_vector(777, 1, 0.05f);
  float scale = 0.0f;
  const auto y = round_trip(x, &scale);
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(scale, amax / 127.0f);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(x[i] - y[i]), scale * 0.5f * (1 + 1e-6f)) << i;
}

TEST(QuantizeInt8, AllZeroRowHasScaleZeroAndDecodesToExactZeros) {
  std::vector<float> x(64, 0.0f);
  std::vector<int8_t> q(64, 5);
  EXPECT_EQ(quantize_row_int8_ref(x.data(), 64, q.data(), "t", 0), 0.0f);
  for (int8_t v : q) EXPECT_EQ(v, 0);
  for (float v : round_trip(x)) EXPECT_EQ(v, 0.0f);
}

TEST(QuantizeInt8, PlusMinusMaxEncodeAsPlusMinus127) {
  std::vector<float> x = {3.5f, -3.5f, 1.0f, 0.0f};
  std::vector<int8_t> q(4);
  const float scale = quantize_row_int8_ref(x.data(), 4, q.data(), "t", 0);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[3], 0);
  EXPECT_NEAR(q[0] * scale, 3.5f, 3.5f * 1e-6f);
}

TEST(QuantizeInt8, SingleOutlierKeepsItsValueAndCrushesTheRest) {
  std::vector<float> x(128, 0.001f);
  x[17] = 100.0f;
  float scale = 0.0f;
  const auto y = round_trip(x, &scale);
  EXPECT_NEAR(y[17], 100.0f, 100.0f * 1e-6f);
  for (size_t i = 0; i < x.size(); ++i)
    if (i != 17) {
      EXPECT_EQ(y[i], 0.0f);  // 0.001 < scale / 2: the outlier's cost, stated by the format
    }
}

TEST(QuantizeInt8, DenormalsStayFiniteAndClose) {
  std::vector<float> x = {1e-40f, -5e-41f, 3e-42f, 0.0f};
  const auto y = round_trip(x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i]));
    EXPECT_LE(std::fabs(x[i] - y[i]), 2e-42f) << i;
  }
  std::vector<float> tiny = {std::numeric_limits<float>::denorm_min(), 0.0f};  // scale underflows to 0
  for (float v : round_trip(tiny)) EXPECT_EQ(v, 0.0f);
}

TEST(QuantizeInt8, LargestFiniteValuesWork) {
  const float big = std::numeric_limits<float>::max();
  const auto y = round_trip({big, -big, big / 2});
  EXPECT_NEAR(y[0] / big, 1.0f, 1e-6f);
  EXPECT_NEAR(y[1] / big, -1.0f, 1e-6f);
}

TEST(QuantizeInt8, NanAndInfAreRejectedNamingTensorAndIndex) {
  std::vector<float> w(3 * 4, 0.5f);
  w[1 * 4 + 2] = std::nanf("");
  EXPECT_THAT([&] { quantize_matrix_int8(w.data(), 3, 4, "layer.0.q.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("layer.0.q.weight"), ::testing::HasSubstr("NaN at [1, 2]"))));
  w[1 * 4 + 2] = -INFINITY;
  EXPECT_THAT([&] { quantize_matrix_int8(w.data(), 3, 4, "layer.0.q.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(::testing::HasSubstr("-Inf at [1, 2]")));
}

TEST(QuantizeInt8, MatrixHasOneScalePerRow) {
  const auto w = qjoule::test::random_vector(5 * 33, 3);
  const Int8Matrix m = quantize_matrix_int8(w.data(), 5, 33, "t");
  EXPECT_EQ(m.scales.size(), 5u);
  EXPECT_EQ(m.bytes(), 5u * 33 + 5 * 4);
  EXPECT_DOUBLE_EQ(int8_bits_per_weight(768), 8.0 + 32.0 / 768);
}

}  // namespace

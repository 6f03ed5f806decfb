// bitsandbytes NF4 (formats.h "nf4"): codes checked against codes derived HERE from the published
// NF4 table (nearest value to x / absmax), nibble order, double quantization against the dynamic map.
// Budgets: codes exact; round trip |x − x̂| <= absmax · (largest half-gap of the table = 0.13852);
// double-quantized absmax within half a dynamic-map step × its group scale.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/quant/quantize_dynamic8.h"
#include "qjoule/quant/quantize_nf4.h"
#include "random_data.h"

namespace {

using namespace qjoule::quant;

// bitsandbytes' published NF4 table (QLoRA paper, appendix; bitsandbytes functional.py).
const double kPublishedNf4[16] = {-1.0,
                                  -0.6961928009986877,
                                  -0.5250730514526367,
                                  -0.39491748809814453,
                                  -0.28444138169288635,
                                  -0.18477343022823334,
                                  -0.09105003625154495,
                                  0.0,
                                  0.07958029955625534,
                                  0.16093020141124725,
                                  0.24611230194568634,
                                  0.33791524171829224,
                                  0.44070982933044434,
                                  0.5626170039176941,
                                  0.7229568362236023,
                                  1.0};

// Expected code: index of the nearest published value (distances in double).
int nearest_published(double v) {
  int best = 0;
  for (int c = 1; c < 16; ++c)
    if (std::fabs(v - kPublishedNf4[c]) < std::fabs(v - kPublishedNf4[best])) best = c;
  return best;
}

// Distance from v to the closest midpoint between adjacent published values.
double distance_to_midpoint(double v) {
  double d = 1e9;
  for (int c = 0; c < 15; ++c) d = std::min(d, std::fabs(v - 0.5 * (kPublishedNf4[c] + kPublishedNf4[c + 1])));
  return d;
}

int code_at(const BlockNf4& b, int i) { return (i % 2 == 0) ? (b.qs[i / 2] >> 4) : (b.qs[i / 2] & 0x0F); }

TEST(Nf4, TableIsThePublishedOne) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(kNf4Table[static_cast<size_t>(c)], static_cast<float>(kPublishedNf4[c])) << c;
  EXPECT_EQ(kNf4Table[kNf4ZeroCode], 0.0f);
  EXPECT_DOUBLE_EQ(kNf4BitsPerWeight, 4.5);
}

TEST(Nf4, CodeIsTheNearestPublishedValueAcrossMinusOneToOne) {
  int checked = 0;
  for (int i = -20000; i <= 20000; ++i) {
    const float v = static_cast<float>(i) / 20000.0f;
    if (distance_to_midpoint(v) < 1e-6) continue;  // within float rounding of a tie
    ASSERT_EQ(quantize_nf4_code(v), nearest_published(v)) << "v=" << v;
    ++checked;
  }
  EXPECT_GT(checked, 39990);
  EXPECT_EQ(quantize_nf4_code(-1.0f), 0);
  EXPECT_EQ(quantize_nf4_code(1.0f), 15);
  EXPECT_EQ(quantize_nf4_code(0.0f), 7);
}

TEST(Nf4, FixedVectorCodesAbsmaxAndNibbleOrderMatchTheTableDerivation) {
  const auto x = qjoule::test::random_vector(64 * 3, 42, 0.03f);
  std::vector<BlockNf4> blocks(3);
  quantize_row_nf4_ref(x.data(), 64 * 3, blocks.data(), "t", 0);
  for (int b = 0; b < 3; ++b) {
    float absmax = 0.0f;
    for (int i = 0; i < 64; ++i) absmax = std::max(absmax, std::fabs(x[static_cast<size_t>(b * 64 + i)]));
    ASSERT_EQ(blocks[static_cast<size_t>(b)].absmax, absmax);
    int expected[64];
    for (int i = 0; i < 64; ++i) {
      const float normalized = x[static_cast<size_t>(b * 64 + i)] * (1.0f / absmax);  // bitsandbytes' reciprocal
      ASSERT_GT(distance_to_midpoint(normalized), 1e-6) << "test vector sits on a tie; pick another seed";
      expected[i] = nearest_published(normalized);
    }
    for (int i = 0; i < 32; ++i) {
      const auto byte = static_cast<uint8_t>((expected[2 * i] << 4) | expected[2 * i + 1]);  // first element high
      ASSERT_EQ(blocks[static_cast<size_t>(b)].qs[i], byte) << "block " << b << " byte " << i;
    }
  }
}

TEST(Nf4, TableValuesTimesAbsmaxEncodeToTheirOwnIndices) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = kNf4Table[static_cast<size_t>(i % 16)] * 3.0f;
  BlockNf4 b{};
  quantize_row_nf4_ref(x.data(), 64, &b, "t", 0);
  EXPECT_EQ(b.absmax, 3.0f);
  const uint8_t expected[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.qs[i], expected[i % 8]) << i;
  std::vector<float> y(64);
  dequantize_row_nf4_ref(&b, 64, y.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
}

TEST(Nf4, RoundTripWithinHalfTheLargestTableGap) {
  const auto x = qjoule::test::random_vector(64 * 20, 3, 0.02f);
  std::vector<BlockNf4> blocks(20);
  quantize_row_nf4_ref(x.data(), 64 * 20, blocks.data(), "t", 0);
  std::vector<float> y(x.size());
  dequantize_row_nf4_ref(blocks.data(), 64 * 20, y.data());
  double half_gap = 0.0;
  for (int c = 0; c < 15; ++c) half_gap = std::max(half_gap, 0.5 * (kPublishedNf4[c + 1] - kPublishedNf4[c]));
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(std::fabs(x[i] - y[i]), blocks[i / 64].absmax * half_gap * 1.0001) << i;
}

TEST(Nf4, EdgeCasesZeroBlockOutlierMaxDenormals) {
  std::vector<float> x(64 * 4, 0.0f);                                    // block 0: all zero
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(64 + i)] = 0.001f;  // block 1: one outlier
  x[64 + 9] = 50.0f;
  x[128] = 2.5f;  // block 2: ±max
  x[129] = -2.5f;
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(192 + i)] = (i % 2 ? 1e-40f : -3e-41f);  // block 3: denormals
  std::vector<BlockNf4> b(4);
  quantize_row_nf4_ref(x.data(), 256, b.data(), "t", 0);
  std::vector<float> y(256);
  dequantize_row_nf4_ref(b.data(), 256, y.data());
  EXPECT_EQ(b[0].absmax, 0.0f);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(code_at(b[0], i), kNf4ZeroCode);
    EXPECT_EQ(std::bit_cast<uint32_t>(y[static_cast<size_t>(i)]), 0u);
  }
  EXPECT_EQ(y[64 + 9], 50.0f);
  EXPECT_EQ(y[64], 0.0f);  // 0.001 / 50 rounds to the 0.0 entry
  EXPECT_EQ(y[128], 2.5f);
  EXPECT_EQ(y[129], -2.5f);
  for (int i = 192; i < 256; ++i) {
    EXPECT_TRUE(std::isfinite(y[static_cast<size_t>(i)]));
    EXPECT_LE(std::fabs(y[static_cast<size_t>(i)] - x[static_cast<size_t>(i)]), 1e-40f * 0.14f) << i;
  }
}

TEST(Nf4, NanInfAndBadShapesAreErrorsNamingTheTensor) {
  std::vector<float> w(2 * 64, 0.1f);
  w[64 + 3] = INFINITY;
  EXPECT_THAT([&] { quantize_matrix_nf4(w.data(), 2, 64, "l.out.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("l.out.weight"), ::testing::HasSubstr("+Inf at [1, 3]"))));
  EXPECT_THAT([&] { quantize_matrix_nf4(w.data(), 0, 64, "l.out.weight"); },
              ::testing::ThrowsMessage<qjoule::Error>(
                  ::testing::AllOf(::testing::HasSubstr("l.out.weight"), ::testing::HasSubstr("[0, 64]"))));
}

// Any width (formats.h): the last block of a row holds t < 64 weights; its absmax is theirs, the
// padding codes are 7 (0.0), and dequantize writes exactly cols values; double quantization counts
// ceil(cols / 64) blocks per row.
TEST(Nf4, APartialLastBlockHasTheAbsmaxOfWhatItHoldsAndZeroPadding) {
  for (int64_t cols : {int64_t{96}, int64_t{331}, int64_t{63}}) {
    const int64_t rows = 2, nb = (cols + 63) / 64, t = cols - (nb - 1) * 64;
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> w(size_t(rows * cols));
    for (auto& v : w) v = dist(rng);
    const auto m = quantize_matrix_nf4(w.data(), rows, cols, "l.out.weight");
    ASSERT_EQ(m.blocks.size(), size_t(rows * nb));
    const auto dq = quantize_matrix_nf4_double(w.data(), rows, cols, "l.out.weight");
    ASSERT_EQ(dq.blocks.size(), size_t(rows * nb));
    for (int64_t r = 0; r < rows; ++r) {
      const BlockNf4& last = m.row(r)[nb - 1];
      float amax = 0.0f;
      for (int64_t c = (nb - 1) * 64; c < cols; ++c) amax = std::max(amax, std::fabs(w[size_t(r * cols + c)]));
      EXPECT_EQ(last.absmax, amax) << "row " << r;
      for (int64_t i = t; i < 64; ++i) {
        EXPECT_EQ(i % 2 == 0 ? last.qs[i / 2] >> 4 : last.qs[i / 2] & 0x0F, kNf4ZeroCode) << "padding " << i;
      }
      std::vector<float> back(size_t(cols) + 1, -1.0f), back_dq(size_t(cols) + 1, -1.0f);
      dequantize_row_nf4_ref(m.row(r), cols, back.data());
      dequantize_row_nf4_dq_ref(dq, r, back_dq.data());
      EXPECT_EQ(back[size_t(cols)], -1.0f);
      EXPECT_EQ(back_dq[size_t(cols)], -1.0f);
      for (int64_t c = 0; c < cols; ++c) {
        EXPECT_LE(std::fabs(back[size_t(c)] - w[size_t(r * cols + c)]), 0.13852f * m.row(r)[c / 64].absmax) << c;
      }
    }
  }
}

// ---- dynamic map and double quantization --------------------------------------------------------

TEST(DynamicMap, IsBitsandbytesSignedMap) {
  const auto& map = dynamic_map_signed();
  for (size_t i = 1; i < map.size(); ++i) ASSERT_LT(map[i - 1], map[i]) << i;
  EXPECT_EQ(map[kDynamicMapZeroCode], 0.0f);
  EXPECT_EQ(map[255], 1.0f);
  for (size_t i = 0; i < 127; ++i) EXPECT_EQ(map[i], -map[254 - i]) << i;  // negatives mirror positives
  EXPECT_NEAR(map[254], 0.99296875f, 1e-6f);                               // largest fraction mean at exponent 0
  EXPECT_NEAR(map[128], 5.5e-7f, 1e-12f);                                  // 10^-6 · (0.1 + 1) / 2
  EXPECT_NEAR(map[0], -0.99296875f, 1e-6f);
}

int nearest_in_map(float v) {
  const auto& map = dynamic_map_signed();
  int best = 0;
  for (int c = 1; c < 256; ++c)
    if (std::fabs(double(v) - map[static_cast<size_t>(c)]) < std::fabs(double(v) - map[static_cast<size_t>(best)]))
      best = c;
  return best;
}

double distance_to_map_midpoint(float v) {
  const auto& map = dynamic_map_signed();
  double d = 1e9;
  for (size_t c = 0; c + 1 < 256; ++c) d = std::min(d, std::fabs(double(v) - 0.5 * (double(map[c]) + map[c + 1])));
  return d;
}

TEST(DynamicMap, BinarySearchCodeIsTheNearestEntry) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int i = 0; i < 20000; ++i) {
    float v = uni(rng);
    if (i % 4 == 0) v *= 1e-3f;  // the dense region near 0
    if (distance_to_map_midpoint(v) < 1e-7 * std::max(1e-3, double(std::fabs(v)))) continue;
    ASSERT_EQ(quantize_dynamic8_code(v), nearest_in_map(v)) << "v=" << v;
  }
  EXPECT_EQ(quantize_dynamic8_code(1.0f), 255);
  EXPECT_EQ(quantize_dynamic8_code(-1.0f), 0);
  EXPECT_EQ(quantize_dynamic8_code(0.0f), kDynamicMapZeroCode);
}

TEST(Nf4DoubleQuant, AbsmaxCodesScalesAndMeanMatchTheDerivation) {
  const int64_t rows = 5, cols = 64 * 60;  // 300 blocks: one full group of 256 and a partial one
  auto w = qjoule::test::random_vector(static_cast<size_t>(rows * cols), 9, 0.02f);
  for (int64_t c = 0; c < 64; ++c) w[static_cast<size_t>(2 * cols + c)] = 0.0f;  // one all-zero block
  const Nf4Matrix single = quantize_matrix_nf4(w.data(), rows, cols, "t");
  const Nf4DqMatrix dq = quantize_matrix_nf4_double(w.data(), rows, cols, "t");
  ASSERT_EQ(dq.blocks.size(), 300u);
  ASSERT_EQ(dq.absmax_scales.size(), 2u);
  double sum = 0.0;
  for (const auto& b : single.blocks) sum += b.absmax;
  const auto mean = static_cast<float>(sum / 300.0);
  EXPECT_EQ(dq.absmax_mean, mean);
  for (size_t g = 0; g < 2; ++g) {
    const size_t begin = g * 256, end = std::min<size_t>(300, begin + 256);
    float scale = 0.0f;
    for (size_t b = begin; b < end; ++b) scale = std::max(scale, std::fabs(single.blocks[b].absmax - mean));
    ASSERT_EQ(dq.absmax_scales[g], scale);
    const auto& map = dynamic_map_signed();
    for (size_t b = begin; b < end; ++b) {
      const float normalized = (single.blocks[b].absmax - mean) * (1.0f / scale);
      ASSERT_GT(distance_to_map_midpoint(normalized), 1e-9) << "tie; pick another seed";
      ASSERT_EQ(dq.blocks[b].absmax_code, nearest_in_map(normalized)) << b;
      // NF4 codes are those of single quantization (computed with the true absmax)
      for (int i = 0; i < 32; ++i) ASSERT_EQ(dq.blocks[b].qs[i], single.blocks[b].qs[i]);
      // decoded absmax within half a map step of the truth
      const int c = dq.blocks[b].absmax_code;
      const double step = std::max(c > 0 ? map[static_cast<size_t>(c)] - map[static_cast<size_t>(c - 1)] : 0.0,
                                   c < 255 ? map[static_cast<size_t>(c + 1)] - map[static_cast<size_t>(c)] : 0.0);
      EXPECT_LE(std::fabs(dq.absmax(static_cast<int64_t>(b)) - single.blocks[b].absmax), 0.5 * step * scale + 1e-7)
          << b;
    }
  }
  // the all-zero block still decodes to exact zeros although its decoded absmax is not exactly 0
  std::vector<float> y(static_cast<size_t>(cols));
  dequantize_row_nf4_dq_ref(dq, 2, y.data());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0.0f);
  EXPECT_EQ(dq.bytes(), 300u * 33 + 2 * 4 + 4);
  EXPECT_NEAR(kNf4DqBitsPerWeight, 4.127, 1e-3);
}

}  // namespace

// The per-element arithmetic shared by the CPU and CUDA kernels (qjoule/quant/element_math.h), held
// on the CPU to what it must compute: BF16 round-to-nearest-even, the exact and tanh GELUs, SiLU·up,
// the RoPE rotation, the 4-bit nibble order, NF4 double-quant absmax and per-token INT8 codes, each
// against a double-precision computation, the format's definition or the CPU `_ref` twin.
#include "qjoule/quant/element_math.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::kernels {
namespace {

std::vector<float> grid() {
  std::vector<float> x;
  for (float v = -8.0f; v <= 8.0f; v += 0.0625f) x.push_back(v);
  for (float v : {1e-6f, -1e-6f, 30.0f, -30.0f, 0.0f}) x.push_back(v);
  return x;
}

TEST(ElementMath, Bf16RoundsToNearestEvenAndKeepsNanAndInf) {
  EXPECT_EQ(element::round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(element::round_to_bf16(1.0f + 0x1p-8f), 1.0f) << "a tie rounds to the even mantissa";
  EXPECT_EQ(element::round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f) << "above the tie rounds up";
  EXPECT_EQ(element::round_to_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f) << "a tie rounds to even, upward";
  EXPECT_TRUE(std::isnan(element::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(element::round_to_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(element::round_to_bf16(std::numeric_limits<float>::max()), std::numeric_limits<float>::infinity())
      << "past the largest BF16";
  EXPECT_EQ(element::f32_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(element::bf16_bits_to_f32(0x3f80), 1.0f);
}

TEST(ElementMath, ActivationsMatchTheCpuReferences) {
  const auto x = grid();
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> tanh_ref = x, gate = x;
  gelu_tanh_f32_ref(tanh_ref.data(), n);
  std::vector<float> up(x.size(), 0.75f);
  silu_mul_f32_ref(gate.data(), up.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    // The definition in double (the _ref twin calls element::gelu_erf itself, so it is no check).
    const double exact = 0.5 * x[i] * (1.0 + std::erf(static_cast<double>(x[i]) / std::sqrt(2.0)));
    EXPECT_NEAR(element::gelu_erf(x[i]), exact, 4e-7 * std::max(1.0, std::fabs(exact))) << x[i];
    EXPECT_NEAR(element::gelu_tanh(x[i]), tanh_ref[i], 4e-7f * std::max(1.0f, std::fabs(tanh_ref[i]))) << x[i];
    EXPECT_NEAR(element::silu_mul(x[i], 0.75f), gate[i], 4e-7f * std::max(1.0f, std::fabs(gate[i]))) << x[i];
    EXPECT_EQ(element::relu(x[i]), x[i] < 0 ? 0.0f : x[i]);
  }
  EXPECT_TRUE(std::isnan(element::relu(std::numeric_limits<float>::quiet_NaN())));
}

TEST(ElementMath, RopeRotatesOnePairAsTheDefinitionSays) {
  for (const int64_t position : {0, 1, 17, 4095}) {
    for (const float inv_freq : {1.0f, 0.1f, 1e-4f}) {
      float a = 0.3f, b = -1.2f;
      element::rope_rotate(a, b, position, inv_freq, 1.5f);
      const long double angle = static_cast<long double>(position) * inv_freq;
      const long double c = std::cos(angle) * 1.5L, s = std::sin(angle) * 1.5L;
      EXPECT_NEAR(a, static_cast<float>(0.3L * c - (-1.2L) * s), 2e-6f) << position << " " << inv_freq;
      EXPECT_NEAR(b, static_cast<float>(-1.2L * c + 0.3L * s), 2e-6f) << position << " " << inv_freq;
    }
  }
}

TEST(ElementMath, NibbleOrderIsTheSameFromBytesAndFromALittleEndianWord) {
  const uint8_t bytes[4] = {0x1f, 0xa2, 0x73, 0xc4};
  const uint32_t word =
      uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 | uint32_t{bytes[3]} << 24;
  const int expected[8] = {0x1, 0xf, 0xa, 0x2, 0x7, 0x3, 0xc, 0x4};  // high nibble first (formats.h)
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(element::nibble_of_bytes(bytes, e), expected[e]) << e;
    EXPECT_EQ(element::nibble_of_word(word, e), expected[e]) << e;
  }
}

TEST(ElementMath, Nf4DoubleQuantAbsmaxRoundsTheProductThenTheSum) {
  // Chosen so that one fused multiply-add would round differently from the two roundings.
  const float map_value = 1.0f + 0x1p-23f, scale = 1.0f - 0x1p-24f, mean = -1.0f;
  const volatile float product = map_value * scale;
  EXPECT_EQ(element::nf4_dq_absmax(map_value, scale, mean), product + mean);
  EXPECT_NE(element::nf4_dq_absmax(map_value, scale, mean), std::fma(map_value, scale, mean));
  // And Nf4DqMatrix decodes with the same two roundings (computed here without element_math).
  std::vector<float> w(2 * 64);
  for (std::size_t k = 0; k < w.size(); ++k) w[k] = std::sin(0.37f * static_cast<float>(k)) * (k < 64 ? 1.0f : 3.0f);
  const auto m = quant::quantize_matrix_nf4_double(w.data(), 2, 64, "w");
  for (int64_t b = 0; b < 2; ++b) {
    const volatile float p =
        quant::dynamic_map_signed()[m.blocks[static_cast<std::size_t>(b)].absmax_code] * m.absmax_scales[0];
    EXPECT_EQ(m.absmax(b), p + m.absmax_mean) << b;
  }
}

TEST(ElementMath, Int8CodesRoundHalfToEvenAndClampAndScalesGuardZeroRows) {
  EXPECT_EQ(element::s8_code(2.5f, 1.0f), 2);
  EXPECT_EQ(element::s8_code(3.5f, 1.0f), 4);
  EXPECT_EQ(element::s8_code(-2.5f, 1.0f), -2);
  EXPECT_EQ(element::s8_code(1000.0f, 1.0f), 127);
  EXPECT_EQ(element::s8_code(-1000.0f, 1.0f), -127);
  float inv = -1.0f, scale = -1.0f;
  element::symmetric_scales(0.0f, 127.0f, inv, scale);
  EXPECT_EQ(inv, 0.0f);
  EXPECT_EQ(scale, 0.0f);
  element::symmetric_scales(2.0f, 127.0f, inv, scale);
  EXPECT_EQ(inv, 63.5f);
  EXPECT_EQ(scale, 2.0f / 127.0f);
}

}  // namespace
}  // namespace qjoule::kernels

// The per-element arithmetic shared by the CPU and CUDA kernels (qjoule/kernels/element_math.h), held
// on the CPU to what it must compute: BF16 round-to-nearest-even, the exact and tanh GELUs, SiLU·up
// and the RoPE rotation, each against a double-precision (or the CPU `_ref` twin's) computation.
#include "qjoule/kernels/element_math.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/encoder_ops.h"

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
  std::vector<float> erf_ref = x, tanh_ref = x, gate = x;
  gelu_erf_f32_ref(erf_ref.data(), n);
  gelu_tanh_f32_ref(tanh_ref.data(), n);
  std::vector<float> up(x.size(), 0.75f);
  silu_mul_f32_ref(gate.data(), up.data(), n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(element::gelu_erf(x[i]), erf_ref[i]) << x[i];  // the _ref twin is this function
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

}  // namespace
}  // namespace qjoule::kernels

// Encoder ops vs their scalar references. Budgets: LayerNorm 1e-5, GELU vs the closed form 1e-6,
// attention 1e-5 (FP32 accumulation over ≤ 64-wide dot products of unit-scale values).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "random_data.h"

#include "qjoule/kernels/encoder_ops.h"

namespace {

using qjoule::test::random_vector;

TEST(EncoderOps, AddLayerNormMatchesReference) {
  const int64_t rows = 7, cols = 96;
  auto x = random_vector(rows * cols, 1), res = random_vector(rows * cols, 2);
  auto g = random_vector(cols, 3), b = random_vector(cols, 4);
  auto ref = x;
  qjoule::kernels::add_layer_norm_f32(x.data(), res.data(), rows, cols, g.data(), b.data(), 1e-12f);
  qjoule::kernels::add_layer_norm_f32_ref(ref.data(), res.data(), rows, cols, g.data(), b.data(), 1e-12f);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], ref[i], 1e-5f) << i;
}

TEST(EncoderOps, GeluIsTheErfForm) {
  std::vector<float> x{-3.0f, -1.0f, -0.1f, 0.0f, 0.5f, 2.0f};
  auto y = x;
  qjoule::kernels::gelu_erf_f32(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(y[i], 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))), 1e-6) << x[i];
}

TEST(EncoderOps, GeluMatchesTheLibmReference) {
  // Budget: 1e-6 absolute + 1e-6 relative over N(0, 3²) inputs (oneDNN's vectorized erf vs erff).
  auto x = random_vector(100000, 9, 3.0f);
  auto ref = x;
  qjoule::kernels::gelu_erf_f32(x.data(), int64_t(x.size()));
  qjoule::kernels::gelu_erf_f32_ref(ref.data(), int64_t(ref.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], ref[i], 1e-6f + 1e-6f * std::fabs(ref[i])) << i;
}

TEST(EncoderOps, AttentionMatchesReferenceWithPadding) {
  const int64_t batch = 3, seq = 11, heads = 4, head_dim = 16, stride = 3 * heads * head_dim;
  auto qkv = random_vector(batch * seq * stride, 5);
  std::vector<int32_t> mask(batch * seq, 1);
  for (int64_t t = 6; t < seq; ++t) mask[1 * seq + t] = 0;  // example 1 has 6 real tokens
  for (int64_t t = 1; t < seq; ++t) mask[2 * seq + t] = 0;  // example 2 has 1
  std::vector<float> ctx(batch * seq * heads * head_dim), ref(ctx.size());
  const float* q = qkv.data();
  const float* k = q + heads * head_dim;
  const float* v = k + heads * head_dim;
  qjoule::kernels::attention_f32(q, k, v, stride, mask.data(), batch, seq, heads, head_dim, ctx.data());
  qjoule::kernels::attention_f32_ref(q, k, v, stride, mask.data(), batch, seq, heads, head_dim, ref.data());
  for (size_t i = 0; i < ctx.size(); ++i) ASSERT_NEAR(ctx[i], ref[i], 1e-5f) << i;
}

TEST(EncoderOps, RoundToBf16IsBitExactWithTheReference) {
  // Budget: bit-exact. Random values plus the edges: ties to even, ±0, denormals, ±max, ±Inf, NaN.
  auto x = random_vector(4099, 6);
  const float inf = std::numeric_limits<float>::infinity();
  for (float e : {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-7f, 1e-40f, -1e-45f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), inf, -inf,
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(e);
  auto ref = x;
  qjoule::kernels::round_to_bf16_f32(x.data(), int64_t(x.size()));
  qjoule::kernels::round_to_bf16_f32_ref(ref.data(), int64_t(ref.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &x[i], 4);
    std::memcpy(&b, &ref[i], 4);
    ASSERT_EQ(a, b) << i;
    ASSERT_EQ(a & 0xffffu, 0u) << "not a BF16 value at " << i;
  }
  EXPECT_EQ(x[4099 + 2], 1.0f) << "a tie rounds to even (down)";
  EXPECT_EQ(x[4099 + 3], 1.0f + 0x1p-6f) << "a tie rounds to even (up)";
  EXPECT_EQ(x[4099 + 6], inf) << "FP32 max rounds past the largest BF16";
  EXPECT_TRUE(std::isnan(x.back()));
}

}  // namespace

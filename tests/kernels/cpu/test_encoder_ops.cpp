// Encoder ops vs their scalar references. Budgets: LayerNorm 1e-5, GELU vs the closed form 1e-6,
// attention 1e-5 (FP32 accumulation over ≤ 64-wide dot products of unit-scale values).
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/encoder_ops.h"

namespace {

std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

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

}  // namespace

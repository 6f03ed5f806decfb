// Sliding-window causal attention (causal_attention_f32 with window > 0) and GeGLU's gelu_tanh_mul_f32
// against their scalar _ref twins, and the properties a windowed KV cache relies on: a windowed query
// equals full attention over just its window's keys, a window at least as long as the context is full
// attention, and a decode step equals the last row of a longer windowed prefill.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"
#include "random_data.h"
#include "vector_diff.h"

#include "qjoule/error.h"
#include "qjoule/kernels/decoder_ops.h"

namespace {

namespace k = qjoule::kernels;
using qjoule::test::max_abs_diff;
using qjoule::test::random_vector;
using qjoule::test::sci;

struct Shape {
  int64_t heads, kv_heads, head_dim;
};

// Budget: 2e-6 absolute (N(0,1) q, k, v; FP32 scores and sums vs the twin's double).
TEST(SlidingWindowAttention, MatchesReferenceForEveryWindow) {
  for (const Shape s : {Shape{4, 2, 16}, Shape{8, 8, 64}, Shape{4, 1, 256}}) {
    const int64_t tokens = 40, q_stride = s.heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
    const auto q = random_vector(tokens * q_stride, 11);
    const auto kc = random_vector(tokens * kv_stride, 12);
    const auto vc = random_vector(tokens * kv_stride, 13);
    const float scale = 1.0f / std::sqrt(float(s.head_dim));
    for (const int64_t window : {1, 3, 8, 39, 40, 100}) {
      for (const int64_t past : {0, 17, 39}) {
        SCOPED_TRACE(testing::Message() << "heads " << s.heads << "/" << s.kv_heads << " of " << s.head_dim
                                        << ", window " << window << ", past " << past);
        const int64_t n = tokens - past;
        std::vector<float> out(n * q_stride), ref(n * q_stride);
        k::causal_attention_f32(q.data() + past * q_stride, q_stride, kc.data(), vc.data(), kv_stride, past, n, s.heads,
                                s.kv_heads, s.head_dim, scale, out.data(), window);
        k::causal_attention_f32_ref(q.data() + past * q_stride, q_stride, kc.data(), vc.data(), kv_stride, past, n,
                                    s.heads, s.kv_heads, s.head_dim, scale, ref.data(), window);
        EXPECT_LE(max_abs_diff(out, ref), 2e-6);
      }
    }
  }
}

TEST(SlidingWindowAttention, AQueryReadsExactlyItsWindowsKeys) {
  const Shape s{4, 2, 32};
  const int64_t tokens = 30, window = 8, q_stride = s.heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const auto q = random_vector(tokens * q_stride, 21);
  const auto kc = random_vector(tokens * kv_stride, 22);
  const auto vc = random_vector(tokens * kv_stride, 23);
  const float scale = 0.125f;
  std::vector<float> windowed(tokens * q_stride);
  k::causal_attention_f32(q.data(), q_stride, kc.data(), vc.data(), kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, scale, windowed.data(), window);
  for (const int64_t t : {0, 7, 8, 29}) {
    // Full attention of token t over a cache that starts at its window's first key.
    const int64_t first = t + 1 > window ? t + 1 - window : 0;
    std::vector<float> alone(q_stride);
    k::causal_attention_f32_ref(q.data() + t * q_stride, q_stride, kc.data() + first * kv_stride,
                                vc.data() + first * kv_stride, kv_stride, t - first, 1, s.heads, s.kv_heads, s.head_dim,
                                scale, alone.data());
    for (int64_t i = 0; i < q_stride; ++i) ASSERT_NEAR(windowed[t * q_stride + i], alone[i], 2e-6) << t << " " << i;
  }
  // A window no shorter than the context is full attention, bit for bit.
  std::vector<float> full(tokens * q_stride), wide(tokens * q_stride);
  k::causal_attention_f32(q.data(), q_stride, kc.data(), vc.data(), kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, scale, full.data());
  k::causal_attention_f32(q.data(), q_stride, kc.data(), vc.data(), kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, scale, wide.data(), tokens);
  EXPECT_EQ(full, wide);
  // Token 29 with window 8 reads keys 22..29: changing key 21 changes nothing of its row.
  auto k2 = kc;
  for (int64_t c = 0; c < kv_stride; ++c) k2[21 * kv_stride + c] += 5.0f;
  std::vector<float> moved(q_stride);
  k::causal_attention_f32(q.data() + 29 * q_stride, q_stride, k2.data(), vc.data(), kv_stride, 29, 1, s.heads,
                          s.kv_heads, s.head_dim, scale, moved.data(), window);
  for (int64_t i = 0; i < q_stride; ++i) ASSERT_EQ(moved[i], windowed[29 * q_stride + i]) << i;
}

TEST(SlidingWindowAttention, DecodeEqualsTheLastRowOfAWindowedPrefill) {
  const Shape s{8, 2, 64};
  const int64_t tokens = 33, window = 5, q_stride = s.heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const auto q = random_vector(tokens * q_stride, 31);
  const auto kc = random_vector(tokens * kv_stride, 32);
  const auto vc = random_vector(tokens * kv_stride, 33);
  std::vector<float> prefill(tokens * q_stride), decode(q_stride);
  k::causal_attention_f32(q.data(), q_stride, kc.data(), vc.data(), kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, 0.125f, prefill.data(), window);
  k::causal_attention_f32(q.data() + (tokens - 1) * q_stride, q_stride, kc.data(), vc.data(), kv_stride, tokens - 1, 1,
                          s.heads, s.kv_heads, s.head_dim, 0.125f, decode.data(), window);
  for (int64_t i = 0; i < q_stride; ++i) ASSERT_EQ(decode[i], prefill[(tokens - 1) * q_stride + i]) << i;
}

TEST(SlidingWindowAttention, ANegativeWindowIsAnError) {
  std::vector<float> q(16), kv(16), out(16);
  try {
    k::causal_attention_f32(q.data(), 16, kv.data(), kv.data(), 16, 0, 1, 1, 1, 16, 0.25f, out.data(), -4);
    FAIL() << "expected an error";
  } catch (const qjoule::Error& e) {
    EXPECT_STREQ(e.what(), "causal_attention: window = -4, expected 0 (none) or a positive number of keys");
  }
}

// Budget: 1e-6 relative to |gate·up| + 1e-6 (oneDNN's gelu_tanh in FP32 vs the twin's double).
TEST(GeluTanhMul, MatchesReference) {
  for (const int64_t n : {1, 7, 64, 1000, 40000}) {
    auto gate = random_vector(n, 41, 3.0f);
    const auto up = random_vector(n, 42);
    auto ref = gate;
    k::gelu_tanh_mul_f32(gate.data(), up.data(), n);
    k::gelu_tanh_mul_f32_ref(ref.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(gate[i], ref[i], 2e-6 * (std::fabs(ref[i]) + 1.0)) << n << " at " << i;
  }
  float g[3] = {0.0f, 1.0f, -1.0f};
  const float u[3] = {5.0f, 2.0f, 2.0f};
  k::gelu_tanh_mul_f32_ref(g, u, 3);
  EXPECT_EQ(g[0], 0.0f);
  EXPECT_NEAR(g[1], 2.0 * 0.8411920, 1e-6);  // gelu_tanh(1) = 0.841192
  EXPECT_NEAR(g[2], 2.0 * -0.1588080, 1e-6);
}

}  // namespace

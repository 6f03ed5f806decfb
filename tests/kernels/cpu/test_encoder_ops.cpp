// Encoder ops vs their scalar references, on every ISA path this CPU can run (scalar, avx2, avx512).
// Budgets: LayerNorm 1e-5, GELU vs the closed form 1e-6, exp 2^-21 relative (4 ulp; flushed to 0
// below FLT_MIN), attention 1e-5 (FP32 accumulation over ≤ 128-wide dot products of unit-scale values,
// with exp's error on top).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "random_data.h"

#include "qjoule/kernels/encoder_ops.h"

namespace {

using qjoule::kernels::EncoderOpsIsa;
using qjoule::test::random_vector;

// The ISAs this CPU runs, the forced one restored to "best" afterwards.
std::vector<EncoderOpsIsa> runnable_isas() {
  std::vector<EncoderOpsIsa> out;
  for (auto isa : {EncoderOpsIsa::scalar, EncoderOpsIsa::avx2, EncoderOpsIsa::avx512})
    if (qjoule::kernels::encoder_ops_isa_supported(isa)) out.push_back(isa);
  return out;
}
struct ForcedIsa {
  explicit ForcedIsa(EncoderOpsIsa isa) { qjoule::kernels::set_encoder_ops_isa(isa); }
  ~ForcedIsa() { qjoule::kernels::set_encoder_ops_isa(std::nullopt); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

TEST(EncoderOps, IsaIsTheBestTheCpuHasUnlessForced) {
  const auto isas = runnable_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(qjoule::kernels::encoder_ops_isa(), isas.back());
  {
    ForcedIsa scalar(EncoderOpsIsa::scalar);
    EXPECT_EQ(qjoule::kernels::encoder_ops_isa(), EncoderOpsIsa::scalar);
  }
  EXPECT_EQ(qjoule::kernels::encoder_ops_isa(), isas.back());
  EXPECT_EQ(qjoule::kernels::encoder_ops_isa_name(EncoderOpsIsa::avx512), "avx512");
}

TEST(EncoderOps, AddLayerNormMatchesReference) {
  for (const auto isa : runnable_isas()) {
    ForcedIsa forced(isa);
    for (const int64_t cols : {96, 768, 77, 5}) {  // whole 2·W blocks, then tails of every kind
      const int64_t rows = 7;
      auto x = random_vector(rows * cols, 1, 3.0f), res = random_vector(rows * cols, 2);
      for (auto& e : x) e += 2.0f;  // a mean away from 0
      auto g = random_vector(cols, 3), b = random_vector(cols, 4);
      for (const bool with_residual : {true, false}) {
        auto y = x, ref = x;
        const float* r = with_residual ? res.data() : nullptr;
        qjoule::kernels::add_layer_norm_f32(y.data(), r, rows, cols, g.data(), b.data(), 1e-12f);
        qjoule::kernels::add_layer_norm_f32_ref(ref.data(), r, rows, cols, g.data(), b.data(), 1e-12f);
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_NEAR(y[i], ref[i], 1e-5f) << encoder_ops_isa_name(isa) << " cols " << cols << " at " << i;
      }
    }
  }
}

TEST(EncoderOps, ExpMatchesLibmWithinBudget) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int i = 0; i <= 200000; ++i) x.push_back(-100.0f + 190.0f * float(i) / 200000.0f);
  for (float e : {0.0f, -0.0f, 1e-30f, -1e-30f, -87.3f, -87.34f, -87.4f, 88.0f, 88.37f, 88.5f, 88.72f, 88.73f, -inf,
                  inf, std::numeric_limits<float>::quiet_NaN()})
    x.push_back(e);
  x.push_back(-1.0f);  // 200,017 values: the last one is a partial vector on both widths
  auto ref = x;
  qjoule::kernels::exp_f32_ref(ref.data(), int64_t(ref.size()));
  for (const auto isa : runnable_isas()) {
    ForcedIsa forced(isa);
    auto y = x;
    qjoule::kernels::exp_f32(y.data(), int64_t(y.size()));
    double worst = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::isnan(ref[i])) {
        ASSERT_TRUE(std::isnan(y[i])) << encoder_ops_isa_name(isa) << " exp(" << x[i] << ")";
      } else if (ref[i] < std::numeric_limits<float>::min()) {
        ASSERT_LE(std::fabs(y[i] - ref[i]), std::numeric_limits<float>::min()) << "exp(" << x[i] << ")";
      } else if (std::isinf(ref[i])) {
        ASSERT_EQ(y[i], inf) << encoder_ops_isa_name(isa) << " exp(" << x[i] << ")";
      } else {
        const double rel = std::fabs(double(y[i]) - double(ref[i])) / double(ref[i]);
        worst = std::max(worst, rel);
        ASSERT_LE(rel, 0x1p-21) << encoder_ops_isa_name(isa) << " exp(" << x[i] << ") = " << y[i] << " vs " << ref[i];
      }
    }
    std::printf("%s: worst relative error of exp %.3g (%.2f × 2^-23)\n", std::string(encoder_ops_isa_name(isa)).c_str(),
                worst, worst / 0x1p-23);
  }
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

// Runs attention_f32 and its _ref twin on q, k, v interleaved as one [rows, 3·hidden] tensor (the
// fused QKV layout) and compares them on every ISA.
void expect_attention_matches(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                              const std::vector<int32_t>& mask, unsigned seed) {
  const int64_t hidden = heads * head_dim, stride = 3 * hidden;
  auto qkv = random_vector(batch * seq * stride, seed);
  const float* q = qkv.data();
  const float* k = q + hidden;
  const float* v = k + hidden;
  std::vector<float> ref(batch * seq * hidden);
  qjoule::kernels::attention_f32_ref(q, k, v, stride, mask.data(), batch, seq, heads, head_dim, ref.data());
  for (const auto isa : runnable_isas()) {
    ForcedIsa forced(isa);
    std::vector<float> ctx(ref.size(), std::numeric_limits<float>::quiet_NaN());
    qjoule::kernels::attention_f32(q, k, v, stride, mask.data(), batch, seq, heads, head_dim, ctx.data());
    for (size_t i = 0; i < ctx.size(); ++i)
      ASSERT_NEAR(ctx[i], ref[i], 1e-5f) << encoder_ops_isa_name(isa) << " seq " << seq << " head_dim " << head_dim
                                         << " at " << i;
  }
}

TEST(EncoderOps, AttentionMatchesReferenceWithPadding) {
  const int64_t batch = 4, seq = 11;
  std::vector<int32_t> mask(batch * seq, 1);
  for (int64_t t = 6; t < seq; ++t) mask[1 * seq + t] = 0;  // example 1 has 6 real tokens
  for (int64_t t = 1; t < seq; ++t) mask[2 * seq + t] = 0;  // example 2 has 1
  for (int64_t t = 0; t < seq; ++t) mask[3 * seq + t] = 0;  // example 3 has none: zero context
  mask[0 * seq + 4] = 0;                                    // a masked key between real ones
  expect_attention_matches(batch, seq, 4, 16, mask, 5);
  expect_attention_matches(batch, seq, 3, 12, mask, 6);  // head_dim not a multiple of any vector width
  expect_attention_matches(batch, seq, 2, 40, mask, 7);
}

TEST(EncoderOps, AttentionMatchesReferenceAtDistilBertHeadShape) {
  // head_dim 64, 128 tokens (whole register blocks), then 37 tokens (partial key vectors and query rows).
  for (const int64_t seq : {128, 37}) {
    std::vector<int32_t> mask(2 * seq, 1);
    for (int64_t t = seq - 5; t < seq; ++t) mask[seq + t] = 0;
    expect_attention_matches(2, seq, 2, 64, mask, 8);
  }
}

TEST(EncoderOps, RoundToBf16IsBitExactWithTheReference) {
  // Budget: bit-exact. Random values plus the edges: ties to even, ±0, denormals, ±max, ±Inf, NaN.
  auto x = random_vector(4099, 6);
  const float inf = std::numeric_limits<float>::infinity();
  for (float e :
       {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-7f, 1e-40f, -1e-45f, std::numeric_limits<float>::max(),
        -std::numeric_limits<float>::max(), inf, -inf, std::numeric_limits<float>::quiet_NaN()})
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

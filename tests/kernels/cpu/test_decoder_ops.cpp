// Decoder ops vs their scalar references (each test states its error budget), RoPE tables vs values
// computed from transformers' definitions, and the properties the KV cache relies on: a decode step
// equals the last row of a longer prefill, and RoPE scores depend only on the position difference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_of.h"
#include "random_data.h"
#include "vector_diff.h"
#include "test_paths.h"

#include "qjoule/kernels/decoder_ops.h"

namespace {

namespace k = qjoule::kernels;
using qjoule::test::error_of;
using qjoule::test::max_abs_diff;
using qjoule::test::random_vector;
using qjoule::test::sci;

// ---------------------------------------------------------------------------------------------------
// RMSNorm. Budget: max abs error ≤ 1e-5 at cols 64..4096 (N(0,1) inputs, N(1, 0.5²) gamma; FP32
// vectorized sum of squares vs double).

TEST(DecoderOps, RmsNormMatchesReference) {
  for (int64_t cols : {64, 96, 896, 2048, 4096, 4099}) {
    const int64_t rows = cols == 2048 ? 33 : 5;  // 33 × 2048 takes the OpenMP path
    auto x = random_vector(rows * cols, 11);
    auto g = random_vector(cols, 12, 0.5f);
    for (auto& v : g) v += 1.0f;
    x[3] = 40.0f;  // an outlier row element, as Llama's hidden states have
    std::vector<float> out(x.size()), ref(x.size());
    k::rms_norm_f32(x.data(), rows, cols, g.data(), 1e-6f, out.data());
    k::rms_norm_f32_ref(x.data(), rows, cols, g.data(), 1e-6f, ref.data());
    const double err = max_abs_diff(out, ref);
    EXPECT_LE(err, 1e-5) << "cols " << cols;
    RecordProperty("rms_norm_max_abs_err_cols_" + std::to_string(cols), sci(err));

    auto in_place = x;  // out == x is allowed
    k::rms_norm_f32(in_place.data(), rows, cols, g.data(), 1e-6f, in_place.data());
    EXPECT_EQ(in_place, out) << "cols " << cols;
  }
}

TEST(DecoderOps, RmsNormOfAConstantRowIsGamma) {
  // x = c everywhere: mean(x²) = c², so out = gamma (eps negligible). Budget 1e-6 abs.
  const int64_t cols = 128;
  std::vector<float> x(cols, -3.0f), out(cols);
  auto g = random_vector(cols, 13);
  k::rms_norm_f32(x.data(), 1, cols, g.data(), 1e-12f, out.data());
  for (int64_t c = 0; c < cols; ++c) EXPECT_NEAR(out[c], -g[c], 1e-6) << c;
}

// ---------------------------------------------------------------------------------------------------
// Activations. Budget: |fast - ref| ≤ 1e-6 + 2e-6·|ref| over N(0, 4²) inputs (oneDNN's vectorized
// exp / tanh vs libm in double), plus the extremes.

std::vector<float> activation_inputs() {
  auto x = random_vector(100003, 21, 4.0f);
  for (float e : {0.0f, -0.0f, 1e-20f, -1e-20f, 20.0f, -20.0f, 80.0f, -80.0f, 88.0f, -88.0f, 100.0f, -100.0f})
    x.push_back(e);
  return x;
}

TEST(DecoderOps, SiluMulMatchesReference) {
  auto gate = activation_inputs();
  auto up = random_vector(gate.size(), 22, 2.0f);
  auto ref = gate;
  k::silu_mul_f32(gate.data(), up.data(), int64_t(gate.size()));
  k::silu_mul_f32_ref(ref.data(), up.data(), int64_t(ref.size()));
  double worst = 0.0;
  for (size_t i = 0; i < gate.size(); ++i) {
    ASSERT_NEAR(gate[i], ref[i], 1e-6 + 2e-6 * std::fabs(ref[i])) << i;
    worst = std::max(worst, std::fabs(double(gate[i]) - ref[i]) / (1e-6 + 2e-6 * std::fabs(ref[i])));
  }
  RecordProperty("silu_mul_worst_fraction_of_budget", sci(worst));
}

TEST(DecoderOps, SiluMulKnownValues) {
  std::vector<float> gate{0.0f, 1.0f, -1.0f, 2.0f}, up{5.0f, 1.0f, 2.0f, -0.5f};
  k::silu_mul_f32(gate.data(), up.data(), 4);
  EXPECT_NEAR(gate[0], 0.0, 1e-7);
  EXPECT_NEAR(gate[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(gate[2], -2.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(gate[3], -0.5 * 2.0 / (1.0 + std::exp(-2.0)), 1e-6);
  k::silu_mul_f32(gate.data(), up.data(), 0);  // n = 0 is a no-op
}

TEST(DecoderOps, GeluTanhMatchesReference) {
  auto x = activation_inputs();
  auto ref = x;
  k::gelu_tanh_f32(x.data(), int64_t(x.size()));
  k::gelu_tanh_f32_ref(ref.data(), int64_t(ref.size()));
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(x[i], ref[i], 1e-6 + 2e-6 * std::fabs(ref[i])) << i;
    worst = std::max(worst, std::fabs(double(x[i]) - ref[i]) / (1e-6 + 2e-6 * std::fabs(ref[i])));
  }
  RecordProperty("gelu_tanh_worst_fraction_of_budget", sci(worst));
}

TEST(DecoderOps, GeluTanhIsGpt2sGeluNew) {
  // Budget 1e-6 abs vs the closed form in double.
  std::vector<float> x{-3.0f, -1.0f, -0.1f, 0.0f, 0.5f, 2.0f};
  auto y = x;
  k::gelu_tanh_f32(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    EXPECT_NEAR(y[i], 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v))), 1e-6)
        << v;
  }
}

// ---------------------------------------------------------------------------------------------------
// RoPE tables. Budget: inv_freq within 1e-6 relative of transformers' formulas (evaluated in double by
// hand for these cases; the fixture holds values from transformers itself).

void expect_inv_freq(const k::RopeTable& t, int64_t i, double expected) {
  ASSERT_LT(i, int64_t(t.inv_freq.size()));
  EXPECT_NEAR(t.inv_freq[i], expected, 1e-6 * std::fabs(expected)) << "inv_freq[" << i << "]";
}

TEST(RopeTable, DefaultIsThetaPowers) {
  const auto t = k::make_rope_table(64, 10000.0, {});
  EXPECT_EQ(t.head_dim, 64);
  ASSERT_EQ(t.inv_freq.size(), 32u);
  EXPECT_EQ(t.attention_factor, 1.0f);
  for (int64_t i = 0; i < 32; ++i) expect_inv_freq(t, i, 1.0 / std::pow(10000.0, 2.0 * double(i) / 64.0));
}

TEST(RopeTable, LinearDividesByFactor) {
  k::RopeScaling s;
  s.type = "linear";
  s.factor = 4.0;
  const auto t = k::make_rope_table(64, 10000.0, s);
  expect_inv_freq(t, 0, 0.25);
  expect_inv_freq(t, 5, 0.059284342641541386);
  expect_inv_freq(t, 31, 3.33380358040831e-05);
  EXPECT_EQ(t.attention_factor, 1.0f);
}

TEST(RopeTable, Llama3MatchesTransformers) {
  // Llama 3.1 8B: head_dim 128, theta 500000, factor 8, low 1, high 4, original 8192. Indices 0 and 20 are
  // high frequency (unchanged), 29..34 are smoothed, 40.. are low frequency (divided by 8).
  k::RopeScaling s;
  s.type = "llama3";
  s.factor = 8.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position_embeddings = 8192;
  const auto t = k::make_rope_table(128, 500000.0, s);
  ASSERT_EQ(t.inv_freq.size(), 64u);
  expect_inv_freq(t, 0, 1.0);
  expect_inv_freq(t, 20, 0.016560440080994446);
  expect_inv_freq(t, 29, 0.002166570763503359);
  expect_inv_freq(t, 30, 0.0013718935677611381);
  expect_inv_freq(t, 31, 0.0008567514129196321);
  expect_inv_freq(t, 32, 0.0005248461609929547);
  expect_inv_freq(t, 34, 0.00017850781276799638);
  expect_inv_freq(t, 40, 3.428102195952591e-05);
  expect_inv_freq(t, 63, 3.068925988914511e-07);
  EXPECT_EQ(t.attention_factor, 1.0f);
}

TEST(RopeTable, YarnMatchesTransformers) {
  // Qwen2.5 with YaRN: head_dim 128, theta 1e6, factor 4, original 32768 → correction range [23, 40].
  k::RopeScaling s;
  s.type = "yarn";
  s.factor = 4.0;
  s.original_max_position_embeddings = 32768;
  const auto t = k::make_rope_table(128, 1e6, s);
  expect_inv_freq(t, 0, 1.0);
  expect_inv_freq(t, 10, 0.1154781984689458);
  expect_inv_freq(t, 20, 0.01333521432163324);
  expect_inv_freq(t, 24, 0.005375321490790102);
  expect_inv_freq(t, 30, 0.0010643609812470017);
  expect_inv_freq(t, 35, 0.0002462584069089387);
  expect_inv_freq(t, 39, 6.490394320837028e-05);
  expect_inv_freq(t, 40, 4.445698525097307e-05);
  expect_inv_freq(t, 63, 3.102344401879299e-07);
  EXPECT_NEAR(t.attention_factor, 1.138629436111989, 1e-6);

  // head_dim 64, theta 10000, factor 2, original 2048 → range [8, 21]; explicit attention_factor is kept.
  s.factor = 2.0;
  s.original_max_position_embeddings = 2048;
  s.attention_factor = 0.75;
  const auto t64 = k::make_rope_table(64, 10000.0, s);
  expect_inv_freq(t64, 0, 1.0);
  expect_inv_freq(t64, 8, 0.1);
  expect_inv_freq(t64, 12, 0.026757734047578592);
  expect_inv_freq(t64, 16, 0.006923076923076923);
  expect_inv_freq(t64, 20, 0.0017027648939368194);
  expect_inv_freq(t64, 31, 6.66760716081662e-05);
  EXPECT_EQ(t64.attention_factor, 0.75f);
}

TEST(RopeTable, UnsupportedTypesAreErrorsNamingTheType) {
  k::RopeScaling s;
  s.type = "dynamic";
  s.factor = 2.0;
  const std::string dynamic = error_of([&] { k::make_rope_table(64, 10000.0, s); });
  EXPECT_NE(dynamic.find("'dynamic'"), std::string::npos) << dynamic;
  EXPECT_NE(dynamic.find("default, linear, llama3, yarn"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find('\n'), std::string::npos) << dynamic;
  s.type = "su";  // Phi-3's older name for longrope: config.json's reader renames it, the table does not
  const std::string su = error_of([&] { k::make_rope_table(64, 10000.0, s); });
  EXPECT_NE(su.find("'su'"), std::string::npos) << su;
  EXPECT_NE(su.find("default, linear, llama3, yarn, longrope"), std::string::npos) << su;
}

// LongRoPE (Phi-3): each frequency divided by its short or long factor; cos and sin scaled by
// sqrt(1 + ln(factor) / ln(original positions)); a factor list of the wrong length is one line.
TEST(RopeTable, LongRopeDividesByItsFactorsAndScalesTheAttention) {
  k::RopeScaling s;
  s.type = "longrope";
  s.factor = 32.0;
  s.original_max_position_embeddings = 4096;
  s.short_factor = {1.0, 2.0, 4.0, 8.0};
  s.long_factor = {3.0, 5.0, 7.0, 9.0};
  const auto plain = k::make_rope_table(8, 10000.0, k::RopeScaling{});
  const auto short_table = k::make_rope_table(8, 10000.0, s);
  const auto long_table = k::make_rope_table(8, 10000.0, s, true);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(short_table.inv_freq[i], plain.inv_freq[i] / s.short_factor[i], 1e-7 * plain.inv_freq[i]);
    EXPECT_NEAR(long_table.inv_freq[i], plain.inv_freq[i] / s.long_factor[i], 1e-7 * plain.inv_freq[i]);
  }
  const double af = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));  // 1.1902
  EXPECT_NEAR(short_table.attention_factor, af, 1e-6);
  EXPECT_NEAR(long_table.attention_factor, af, 1e-6);
  s.long_factor.pop_back();
  const std::string m = error_of([&] { k::make_rope_table(8, 10000.0, s, true); });
  EXPECT_NE(m.find("long_factor has 3 values, expected 4"), std::string::npos) << m;
}

TEST(RopeTable, BadArgumentsAreErrors) {
  EXPECT_NE(error_of([] { k::make_rope_table(63, 10000.0, {}); }).find("head_dim = 63"), std::string::npos);
  k::RopeScaling s;
  s.type = "llama3";
  s.factor = 8.0;  // original_max_position_embeddings missing
  EXPECT_NE(error_of([&] { k::make_rope_table(64, 10000.0, s); }).find("original_max_position_embeddings"),
            std::string::npos);
  s.type = "linear";
  s.factor = 0.0;
  EXPECT_NE(error_of([&] { k::make_rope_table(64, 10000.0, s); }).find("factor = 0"), std::string::npos);
}

// The HF config's rope_scaling dict → RopeScaling, as decoder_config.cpp reads it.
k::RopeScaling rope_scaling_from_hf(const nlohmann::json& rs, int64_t max_position_embeddings) {
  k::RopeScaling s;
  if (rs.is_null()) return s;
  // (find, not value(): GCC 12 sees a null dereference inside json::value at -O3)
  const auto type = rs.find(rs.contains("rope_type") ? "rope_type" : "type");
  s.type = type != rs.end() && type->is_string() ? type->get<std::string>() : std::string("default");
  auto number = [&](const char* key, double fallback) {
    auto it = rs.find(key);
    return it == rs.end() || it->is_null() ? fallback : it->get<double>();
  };
  s.factor = number("factor", 1.0);
  s.low_freq_factor = number("low_freq_factor", 1.0);
  s.high_freq_factor = number("high_freq_factor", 4.0);
  s.original_max_position_embeddings =
      int64_t(number("original_max_position_embeddings", double(max_position_embeddings)));
  s.beta_fast = number("beta_fast", 32.0);
  s.beta_slow = number("beta_slow", 1.0);
  s.attention_factor = number("attention_factor", 0.0);
  return s;
}

TEST(RopeTable, MatchesTransformersFixture) {
  // Budget: inv_freq and attention_factor within 1e-6 relative of transformers' own output.
  const auto path = qjoule::test::fixtures_dir() / "decoders" / "rope_cases.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "fixture absent: " << path.string();
  std::ifstream in(path);
  const auto cases = nlohmann::json::parse(in);
  ASSERT_TRUE(cases.is_array());
  ASSERT_FALSE(cases.empty());
  double worst = 0.0;
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const int64_t head_dim = c.at("head_dim").get<int64_t>();
    const k::RopeScaling s = rope_scaling_from_hf(c.at("rope_scaling"), c.at("max_position_embeddings").get<int64_t>());
    const auto t = k::make_rope_table(head_dim, c.at("rope_theta").get<double>(), s);
    const auto expected = c.at("inv_freq").get<std::vector<double>>();
    ASSERT_EQ(t.inv_freq.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      const double rel = std::fabs(t.inv_freq[i] - expected[i]) / std::fabs(expected[i]);
      worst = std::max(worst, rel);
      EXPECT_LE(rel, 1e-6) << "inv_freq[" << i << "] = " << t.inv_freq[i] << ", expected " << expected[i];
    }
    const double af = c.at("attention_factor").get<double>();
    EXPECT_NEAR(t.attention_factor, af, 1e-6 * std::fabs(af));
  }
  RecordProperty("rope_fixture_worst_rel_err", sci(worst));
}

// ---------------------------------------------------------------------------------------------------
// apply_rope. Budget: max abs error ≤ 2e-6 vs the double reference (N(0,1) values; cos and sin rounded
// to FP32 once), at positions up to 131072.

TEST(ApplyRope, MatchesReference) {
  k::RopeScaling yarn;
  yarn.type = "yarn";
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 32768;
  struct Case {
    int64_t head_dim;
    double theta;
    k::RopeScaling scaling;
  };
  for (const Case& c : {Case{64, 10000.0, {}}, Case{128, 1e6, yarn}, Case{16, 10000.0, {}}}) {
    const auto table = k::make_rope_table(c.head_dim, c.theta, c.scaling);
    const int64_t heads = 4, n_tokens = 40;                 // 40 × 4 × 128 takes the OpenMP path
    const int64_t row_stride = 3 * heads * c.head_dim + 5;  // q inside a fused qkv row, odd stride
    for (int64_t first : {int64_t{0}, int64_t{5000}, int64_t{131072 - n_tokens}}) {
      auto x = random_vector(n_tokens * row_stride, unsigned(first + c.head_dim));
      auto ref = x;
      auto orig = x;
      k::apply_rope_f32(x.data(), n_tokens, row_stride, heads, first, table);
      k::apply_rope_f32_ref(ref.data(), n_tokens, row_stride, heads, first, table);
      const double err = max_abs_diff(x, ref);
      EXPECT_LE(err, 2e-6) << "head_dim " << c.head_dim << " first " << first;
      RecordProperty("rope_max_abs_err_d" + std::to_string(c.head_dim) + "_p" + std::to_string(first), sci(err));
      for (int64_t t = 0; t < n_tokens; ++t)  // columns past the rotated heads are untouched
        for (int64_t col = heads * c.head_dim; col < row_stride; ++col)
          ASSERT_EQ(x[t * row_stride + col], orig[t * row_stride + col]);
    }
  }
}

TEST(ApplyRope, PositionZeroIsIdentityTimesAttentionFactor) {
  k::RopeScaling yarn;
  yarn.type = "yarn";
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  const auto table = k::make_rope_table(32, 10000.0, yarn);
  auto x = random_vector(32, 31);
  auto y = x;
  k::apply_rope_f32(y.data(), 1, 32, 1, 0, table);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(y[i], x[i] * table.attention_factor);
}

TEST(ApplyRope, ScoresDependOnlyOnThePositionDifference) {
  // q at position m, k at position n: (R_m q)·(R_n k) = q·(R_{n-m} k). Shifting both by Δ must keep the
  // score. Budget: 1e-4 abs on scores of magnitude ~8 (FP32 rotation and dot product, positions ≤ 40000).
  const int64_t head_dim = 128;
  const auto table = k::make_rope_table(head_dim, 500000.0, {});
  ASSERT_EQ(table.attention_factor, 1.0f);
  const auto q0 = random_vector(head_dim, 41), k0 = random_vector(head_dim, 42);
  auto score = [&](int64_t m, int64_t n) {
    auto q = q0, kk = k0;
    k::apply_rope_f32(q.data(), 1, head_dim, 1, m, table);
    k::apply_rope_f32(kk.data(), 1, head_dim, 1, n, table);
    double s = 0.0;
    for (int64_t d = 0; d < head_dim; ++d) s += double(q[d]) * kk[d];
    return s;
  };
  double worst = 0.0;
  for (int64_t m : {0, 3, 100}) {
    for (int64_t n : {0, 1, 7, 250}) {
      const double base = score(m, n);
      for (int64_t delta : {1, 17, 1000, 40000}) {
        const double shifted = score(m + delta, n + delta);
        EXPECT_NEAR(shifted, base, 1e-4) << "m " << m << " n " << n << " delta " << delta;
        worst = std::max(worst, std::fabs(shifted - base));
      }
    }
  }
  EXPECT_GT(std::fabs(score(0, 5) - score(0, 50)), 1e-3) << "scores should change with the distance";
  RecordProperty("rope_shift_worst_abs_err", sci(worst));
}

TEST(ApplyRope, RejectsAMismatchedRow) {
  const auto table = k::make_rope_table(64, 10000.0, {});
  std::vector<float> x(100);
  EXPECT_NE(error_of([&] { k::apply_rope_f32(x.data(), 1, 100, 2, 0, table); }).find("row_stride"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------
// Log-softmax. Budget: |fast - ref| ≤ 1e-6 + 2.4e-7·|ref| (2 ulp of the result) vs a double reference,
// over values up to ±1e4 (log-probabilities down to −2e4), vocab 50000.

std::vector<float> log_softmax_ref(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(x[r * cols + c]) - m);
    const double lse = m + std::log(sum);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = float(double(x[r * cols + c]) - lse);
  }
  return out;
}

void check_log_softmax(const std::vector<float>& x, int64_t rows, int64_t cols, const char* what) {
  std::vector<float> out(x.size());
  k::log_softmax_f32(x.data(), rows, cols, out.data());
  const auto ref = log_softmax_ref(x, rows, cols);
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(std::isfinite(out[i])) << what << " " << i;
    const double budget = 1e-6 + 2.4e-7 * std::fabs(ref[i]);
    ASSERT_LE(std::fabs(double(out[i]) - ref[i]), budget) << what << " " << i << ": " << out[i] << " vs " << ref[i];
    worst = std::max(worst, std::fabs(double(out[i]) - ref[i]) / budget);
  }
  for (int64_t r = 0; r < rows; ++r) {  // each row is a distribution
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(out[r * cols + c]));
    EXPECT_NEAR(sum, 1.0, 1e-5) << what << " row " << r;
  }
  auto in_place = x;
  k::log_softmax_f32(in_place.data(), rows, cols, in_place.data());
  EXPECT_EQ(in_place, out) << what;
  ::testing::Test::RecordProperty(std::string("log_softmax_worst_fraction_of_budget_") + what, sci(worst));
}

TEST(LogSoftmax, LargeMagnitudeVocab50000) {
  const int64_t cols = 50000;
  // Uniform in [−1e4, 1e4]: the largest logit dominates, the rest are ≈ −2e4.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-1e4f, 1e4f);
  std::vector<float> x(3 * cols);
  for (auto& v : x) v = wide(rng);
  x[cols + 17] = 1e4f;  // row 1: an exact ±1e4 pair
  x[cols + 18] = -1e4f;
  check_log_softmax(x, 3, cols, "wide");
  // Logits of a language model: all near +1e4, differences of order 1 (the max subtraction matters).
  auto near = random_vector(2 * cols, 6, 3.0f);
  for (auto& v : near) v += 1e4f;
  check_log_softmax(near, 2, cols, "offset");
  auto neg = random_vector(cols, 7, 3.0f);
  for (auto& v : neg) v -= 1e4f;
  check_log_softmax(neg, 1, cols, "negative_offset");
  check_log_softmax(random_vector(7 * 1000, 8, 2.0f), 7, 1000, "small");
}

TEST(LogSoftmax, KnownValues) {
  std::vector<float> x{1.0f, 2.0f, 3.0f, 0.0f, 0.0f, 0.0f}, out(6);
  k::log_softmax_f32(x.data(), 2, 3, out.data());
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(out[0], 1.0 - lse, 1e-6);
  EXPECT_NEAR(out[2], 3.0 - lse, 1e-6);
  EXPECT_NEAR(out[4], -std::log(3.0), 1e-6);
}

}  // namespace

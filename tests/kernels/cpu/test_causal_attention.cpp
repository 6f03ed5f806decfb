// Causal attention over a KV cache (causal_attention_f32, qjoule/kernels/decoder_ops.h): the entry point, and
// its AVX-512 kernel (causal_attention_avx512.h) on odd shapes: head widths that are not a multiple of 16 (8, 24,
// 80, 100) up to 256, query groups of 1-8 heads (MQA, GQA, MHA) that do not fill the heads taken at once, key
// counts around the 16-key blocks, windows. Budget: 1e-5 absolute against causal_attention_f32_ref (double;
// unit-normal q, k, v; scale 1/√head_dim). A row's result is the same bits whatever runs beside it (tokens,
// threads), and the kernel's exp within 2 ulp of expf.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "error_of.h"

#include "kernels/cpu/causal_attention_avx512.h"
#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/threads.h"
#include "random_data.h"
#include "vector_diff.h"

namespace {

namespace k = qjoule::kernels;
using qjoule::test::error_of;
using qjoule::test::max_abs_diff;
using qjoule::test::random_vector;
using qjoule::test::sci;

// ---------------------------------------------------------------------------------------------------
// Causal attention. Budget: max abs error ≤ 1e-5 vs the double reference (N(0,1) q/k/v, scale
// 1/√head_dim); decode vs prefill rows ≤ 1e-6 (the same loops: bit-identical, tested below on the AVX-512 kernel).

struct AttnShape {
  int64_t heads, kv_heads, head_dim;
};

struct KvData {
  int64_t q_stride, kv_stride;
  std::vector<float> q, k, v;
};

// q rows carry padding past heads·head_dim, the cache rows too, as fused layouts do.
KvData make_kv(const AttnShape& s, int64_t tokens, unsigned seed, float q_sigma = 1.0f) {
  KvData d;
  d.q_stride = s.heads * s.head_dim + 3;
  d.kv_stride = s.kv_heads * s.head_dim + 7;
  d.q = random_vector(tokens * d.q_stride, seed, q_sigma);
  d.k = random_vector(tokens * d.kv_stride, seed + 1);
  d.v = random_vector(tokens * d.kv_stride, seed + 2);
  return d;
}

TEST(CausalAttention, MatchesReferencePrefillAndDecode) {
  for (const AttnShape& s : {AttnShape{8, 2, 16}, AttnShape{8, 2, 64}, AttnShape{4, 4, 16}, AttnShape{4, 4, 64}}) {
    const int64_t total = 18;
    const auto d = make_kv(s, total, unsigned(s.heads * 100 + s.kv_heads * 10 + s.head_dim));
    const float scale = 1.0f / std::sqrt(float(s.head_dim));
    const int64_t ctx_cols = s.heads * s.head_dim;
    struct Step {
      int64_t past, n_new;
    };
    for (const Step& st : {Step{0, 17}, Step{17, 1}, Step{0, 18}, Step{5, 13}}) {
      SCOPED_TRACE(testing::Message() << "heads " << s.heads << "/" << s.kv_heads << " head_dim " << s.head_dim
                                      << " past " << st.past << " n_new " << st.n_new);
      std::vector<float> ctx(st.n_new * ctx_cols), ref(ctx.size());
      const float* q = d.q.data() + st.past * d.q_stride;
      k::causal_attention_f32(q, d.q_stride, d.k.data(), d.v.data(), d.kv_stride, st.past, st.n_new, s.heads,
                              s.kv_heads, s.head_dim, scale, ctx.data());
      k::causal_attention_f32_ref(q, d.q_stride, d.k.data(), d.v.data(), d.kv_stride, st.past, st.n_new, s.heads,
                                  s.kv_heads, s.head_dim, scale, ref.data());
      const double err = max_abs_diff(ctx, ref);
      EXPECT_LE(err, 1e-5);
      RecordProperty("attn_max_abs_err_h" + std::to_string(s.heads) + "_kv" + std::to_string(s.kv_heads) + "_d" +
                         std::to_string(s.head_dim) + "_past" + std::to_string(st.past),
                     sci(err));
    }
  }
}

TEST(CausalAttention, DecodeEqualsTheRowsOfALongerPrefill) {
  for (const AttnShape& s : {AttnShape{8, 2, 16}, AttnShape{8, 2, 64}, AttnShape{4, 4, 16}, AttnShape{4, 4, 64}}) {
    SCOPED_TRACE(testing::Message() << "heads " << s.heads << "/" << s.kv_heads << " head_dim " << s.head_dim);
    const int64_t total = 18, ctx_cols = s.heads * s.head_dim;
    const auto d = make_kv(s, total, unsigned(7 + s.head_dim + s.kv_heads));
    const float scale = 1.0f / std::sqrt(float(s.head_dim));
    for (bool use_ref : {false, true}) {
      auto attn = use_ref ? k::causal_attention_f32_ref : k::causal_attention_f32;
      std::vector<float> full(total * ctx_cols), prefill(17 * ctx_cols), decode(ctx_cols);
      attn(d.q.data(), d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 0, total, s.heads, s.kv_heads, s.head_dim,
           scale, full.data(), 0);
      attn(d.q.data(), d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 0, 17, s.heads, s.kv_heads, s.head_dim, scale,
           prefill.data(), 0);
      attn(d.q.data() + 17 * d.q_stride, d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 17, 1, s.heads, s.kv_heads,
           s.head_dim, scale, decode.data(), 0);
      for (int64_t i = 0; i < 17 * ctx_cols; ++i)
        ASSERT_NEAR(prefill[i], full[i], 1e-6) << "ref " << use_ref << " " << i;
      for (int64_t i = 0; i < ctx_cols; ++i)
        ASSERT_NEAR(decode[i], full[17 * ctx_cols + i], 1e-6) << "ref " << use_ref << " " << i;
    }
  }
}

TEST(CausalAttention, GroupedQueryHeadsShareTheirKvHead) {
  // heads 8 / kv 2: query heads 0..3 read kv head 0, 4..7 read kv head 1. With identical queries in every
  // head, the outputs of heads in one group are identical and the two groups differ.
  const AttnShape s{8, 2, 16};
  const int64_t tokens = 6;
  auto d = make_kv(s, tokens, 77);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 1; h < s.heads; ++h)
      for (int64_t c = 0; c < s.head_dim; ++c) d.q[t * d.q_stride + h * s.head_dim + c] = d.q[t * d.q_stride + c];
  std::vector<float> ctx(tokens * s.heads * s.head_dim);
  k::causal_attention_f32(d.q.data(), d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, 0.25f, ctx.data());
  auto at = [&](int64_t t, int64_t h, int64_t c) { return ctx[(t * s.heads + h) * s.head_dim + c]; };
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t c = 0; c < s.head_dim; ++c) ASSERT_EQ(at(t, h, c), at(t, h < 4 ? 0 : 4, c));
  EXPECT_NE(at(tokens - 1, 0, 0), at(tokens - 1, 4, 0));
  // The first token attends only to itself: its output is its value row.
  for (int64_t c = 0; c < s.head_dim; ++c) EXPECT_NEAR(at(0, 5, c), d.v[s.head_dim + c], 1e-6);
}

TEST(CausalAttention, LargeScoresStayFinite) {
  // q scaled ×40 gives scores of ~±300: softmax with the max subtracted stays finite. Budget 1e-5 abs
  // (the probabilities are near one-hot, ctx ≈ one value row).
  const AttnShape s{4, 2, 64};
  const int64_t tokens = 18;
  const auto d = make_kv(s, tokens, 99, 40.0f);
  std::vector<float> ctx(tokens * s.heads * s.head_dim), ref(ctx.size());
  k::causal_attention_f32(d.q.data(), d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 0, tokens, s.heads, s.kv_heads,
                          s.head_dim, 0.125f, ctx.data());
  k::causal_attention_f32_ref(d.q.data(), d.q_stride, d.k.data(), d.v.data(), d.kv_stride, 0, tokens, s.heads,
                              s.kv_heads, s.head_dim, 0.125f, ref.data());
  for (float v : ctx) ASSERT_TRUE(std::isfinite(v));
  EXPECT_LE(max_abs_diff(ctx, ref), 1e-5);
}

TEST(CausalAttention, HeadsNotAMultipleOfKvHeadsIsAnError) {
  std::vector<float> buf(1024);
  const std::string msg = error_of(
      [&] { k::causal_attention_f32(buf.data(), 96, buf.data(), buf.data(), 32, 0, 1, 6, 4, 16, 0.25f, buf.data()); });
  EXPECT_NE(msg.find("heads = 6, kv_heads = 4"), std::string::npos) << msg;
  const std::string ref_msg = error_of([&] {
    k::causal_attention_f32_ref(buf.data(), 96, buf.data(), buf.data(), 32, 0, 1, 6, 4, 16, 0.25f, buf.data());
  });
  EXPECT_EQ(ref_msg, msg);
}

// ---------------------------------------------------------------------------------------------------
// The AVX-512 kernel.

using Attention = void (*)(const float*, int64_t, const float*, const float*, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, float, float*, int64_t);

std::vector<float> run(Attention attention, const AttnShape& s, const KvData& c, int64_t past, int64_t n_new,
                       int64_t window, float scale) {
  std::vector<float> ctx(static_cast<size_t>(n_new * s.heads * s.head_dim), std::nanf(""));
  attention(c.q.data() + past * c.q_stride, c.q_stride, c.k.data(), c.v.data(), c.kv_stride, past, n_new, s.heads,
            s.kv_heads, s.head_dim, scale, ctx.data(), window);
  return ctx;
}

class AttentionAvx512 : public testing::Test {
 protected:
  void SetUp() override {
    if (!k::cpu_supports_attention_avx512()) GTEST_SKIP() << "this CPU has no AVX512F/BW/VL";
  }
};

TEST_F(AttentionAvx512, MatchesTheReferenceOnOddShapes) {
  const AttnShape shapes[] = {{1, 1, 8},   {4, 1, 24},   {6, 2, 64}, {32, 4, 64}, {5, 5, 80},
                              {8, 2, 100}, {16, 8, 128}, {6, 3, 96}, {4, 1, 256}, {3, 1, 16}};
  struct Step {
    int64_t past, n_new, window;
  };
  const Step steps[] = {{0, 1, 0},  {0, 17, 0}, {15, 1, 0}, {16, 1, 0}, {17, 1, 0},
                        {31, 3, 0}, {40, 1, 5}, {3, 30, 7}, {47, 2, 16}};
  for (const AttnShape& s : shapes) {
    const auto c = make_kv(s, 50, static_cast<unsigned>(s.heads * 1000 + s.kv_heads * 100 + s.head_dim));
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    for (const Step& st : steps) {
      SCOPED_TRACE(testing::Message() << "heads " << s.heads << "/" << s.kv_heads << " head_dim " << s.head_dim
                                      << " past " << st.past << " new " << st.n_new << " window " << st.window);
      const auto fast = run(k::causal_attention_f32_avx512, s, c, st.past, st.n_new, st.window, scale);
      const auto ref = run(k::causal_attention_f32_ref, s, c, st.past, st.n_new, st.window, scale);
      EXPECT_LE(max_abs_diff(fast, ref), 1e-5);
    }
  }
}

// causal_attention_f32 runs this kernel where it applies, and the generic loop for wider heads.
TEST_F(AttentionAvx512, TheEntryPointRunsItAndWiderHeadsStillMatch) {
  for (const AttnShape& s : {AttnShape{8, 2, 64}, AttnShape{2, 1, 264}}) {
    const auto c = make_kv(s, 20, 5);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const auto entry = run(k::causal_attention_f32, s, c, 3, 17, 0, scale);
    EXPECT_LE(max_abs_diff(entry, run(k::causal_attention_f32_ref, s, c, 3, 17, 0, scale)), 1e-5);
    if (s.head_dim <= k::kAttentionAvx512MaxHeadDim) {
      EXPECT_EQ(entry, run(k::causal_attention_f32_avx512, s, c, 3, 17, 0, scale));
    }
  }
}

// A decode step gives the bits the prefill gave for the same position, with and without a window, at any
// thread count: a row's sums do not depend on what runs beside it.
TEST_F(AttentionAvx512, ARowIsTheSameBitsInAPrefillADecodeStepAndOnOneThread) {
  const AttnShape s{12, 3, 80};
  const int64_t total = 45, cols = s.heads * s.head_dim;
  const auto c = make_kv(s, total, 11);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  for (int64_t window : {int64_t{0}, int64_t{9}}) {
    SCOPED_TRACE(testing::Message() << "window " << window);
    const auto prefill = run(k::causal_attention_f32_avx512, s, c, 0, total, window, scale);
    for (int64_t past : {int64_t{15}, int64_t{16}, int64_t{44}}) {
      const auto step = run(k::causal_attention_f32_avx512, s, c, past, 1, window, scale);
      const std::vector<float> row(prefill.begin() + past * cols, prefill.begin() + (past + 1) * cols);
      EXPECT_EQ(step, row) << "past " << past;
    }
    const int before = k::num_threads();
    k::set_num_threads(1);
    const auto one = run(k::causal_attention_f32_avx512, s, c, 0, total, window, scale);
    k::set_num_threads(before);
    EXPECT_EQ(one, prefill);
  }
}

// Scores of ~±300 (q ×40): the max is subtracted before exp, so the weights stay finite and near one-hot. A score's
// FP32 error is at most 8 roundings (4 products a lane at head_dim 64, 4 levels of the 16-lane sum) of
// scale·Σ_d|q_d·k_d|; the weights' relative error twice that, the output's that times max|v|:
//   budget = 1e-5 + 16·2⁻²⁴·scale·max_j Σ_d|q_d·k_jd|·max|v|.
TEST_F(AttentionAvx512, LargeScoresStayFiniteWithinTheirRoundingBudget) {
  const AttnShape s{4, 2, 64};
  const int64_t tokens = 40;
  const float scale = 0.125f;
  const auto c = make_kv(s, tokens, 99, 40.0f);
  double max_abs_scores = 0.0, max_v = 0.0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t j = 0; j <= t; ++j) {
        double sum = 0.0;
        for (int64_t d = 0; d < s.head_dim; ++d)
          sum += std::fabs(double(c.q[t * c.q_stride + h * s.head_dim + d]) *
                           c.k[j * c.kv_stride + (h / 2) * s.head_dim + d]);
        max_abs_scores = std::max(max_abs_scores, scale * sum);
      }
  for (float v : c.v) max_v = std::max(max_v, std::fabs(double(v)));
  const auto fast = run(k::causal_attention_f32_avx512, s, c, 0, tokens, 0, scale);
  for (float v : fast) ASSERT_TRUE(std::isfinite(v));
  const double budget = 1e-5 + 16.0 * std::ldexp(1.0, -24) * max_abs_scores * max_v;
  const double err = max_abs_diff(fast, run(k::causal_attention_f32_ref, s, c, 0, tokens, 0, scale));
  EXPECT_LE(err, budget);
  RecordProperty("large_scores_err_over_budget", std::to_string(err / budget));
}

// A NaN in one key row is NaN in the outputs of every head and later token that reads it, never a finite number
// made from it; the heads of the other KV head and the tokens before it stay finite. Both kernels: the AVX-512
// one (head_dim 64) and the generic loop (264).
TEST_F(AttentionAvx512, ANanKeyMakesTheRowsThatReadItNan) {
  for (const AttnShape& s : {AttnShape{4, 2, 64}, AttnShape{4, 2, 264}}) {
    SCOPED_TRACE(testing::Message() << "head_dim " << s.head_dim);
    auto c = make_kv(s, 12, 21);
    c.k[5 * c.kv_stride + 3] = std::nanf("");  // key 5 of KV head 0 (query heads 0 and 1)
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const auto ctx = run(k::causal_attention_f32, s, c, 0, 12, 0, scale);
    for (int64_t t = 0; t < 12; ++t)
      for (int64_t h = 0; h < s.heads; ++h) {
        const float v = ctx[(t * s.heads + h) * s.head_dim];
        EXPECT_EQ(std::isnan(v), t >= 5 && h < 2) << "token " << t << " head " << h;
      }
  }
}

// exp over [−87, 88]: within 2 ulp of expf; e^0 = 1 exactly; NaN stays NaN; below −87.3 a tiny positive value.
TEST_F(AttentionAvx512, ExpIsWithinTwoUlpOfExpf) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  x.push_back(-1000.0f);
  std::vector<float> y(x.size());
  k::exp_ps_avx512_for_test(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i + 3 < x.size(); ++i) {
    const float want = std::exp(x[i]);
    ASSERT_LE(std::fabs(y[i] - want), 2.0f * (std::nextafter(want, std::numeric_limits<float>::infinity()) - want))
        << "x = " << x[i];
  }
  EXPECT_EQ(y[x.size() - 3], 1.0f);
  EXPECT_TRUE(std::isnan(y[x.size() - 2]));
  EXPECT_GT(y[x.size() - 1], 0.0f);
  EXPECT_LT(y[x.size() - 1], 1.3e-38f);
}

}  // namespace

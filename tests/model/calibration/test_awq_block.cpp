// AWQ's folding on one block (model/calibration/awq_block.h), exactly: after scale_awq_block every product that the
// block computes before quantization is unchanged, element by element, for a Llama block (norm γ into
// Q, K, V and into gate, up; O's scales into V's rows and bias; down's into up's rows) and a GPT-2 block
// (LayerNorm γ and β into c_attn and c_fc; c_proj's into c_attn's last rows and bias; the MLP's c_proj,
// after GELU, unscaled). Inputs whose channels differ in size make every group choose scales.
#include <gmock/gmock.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "model/calibration/awq_block.h"
#include "qjoule/quant/format_spec.h"

namespace {

using namespace qjoule;
using model::LinearParams;
using model::detail::AwqBlock;
using model::detail::CalibratingLinear;
using model::detail::InputStatistics;

std::vector<float> gaussian(std::size_t n, unsigned seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Block {
  std::map<std::string, LinearParams> weights;  // as they were
  std::vector<std::unique_ptr<CalibratingLinear>> linears;
  std::map<std::string, CalibratingLinear*> by_name;

  CalibratingLinear* add(const std::string& name, int64_t out, int64_t in, bool bias,
                         std::shared_ptr<InputStatistics> stats, bool records) {
    LinearParams p;
    p.name = name, p.out_features = out, p.in_features = in;
    p.weight = gaussian(size_t(out * in), unsigned(weights.size() + 1), 0.05f);
    if (bias) p.bias = gaussian(size_t(out), 99, 0.5f);
    weights[name] = p;
    LinearParams shape = p;
    shape.weight.clear();
    shape.bias.clear();
    auto l = std::make_unique<CalibratingLinear>(
        shape, [p](LinearParams& q) { q = p; }, quant::parse_format_spec("int4:g=32:awq"), std::move(stats), records,
        /*bf16_products=*/false);
    l->begin();
    by_name[name] = l.get();
    linears.push_back(std::move(l));
    return linears.back().get();
  }
};

// Inputs to l with uneven channels (every 7th 10x larger), recorded into its statistics.
void feed(const CalibratingLinear& l, unsigned seed) {
  const int64_t in = l.in_features(), tokens = 64;
  auto x = gaussian(size_t(tokens * in), seed, 1.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < in; j += 7) x[size_t(t * in + j)] *= 10.0f;
  std::vector<float> y(size_t(tokens * l.out_features()));
  l.forward(x.data(), tokens, y.data());
}

// out[r, j] · (what feeds column j)[j] unchanged: w'[r, j] · f'[j] == w[r, j] · f[j], for the rows before
// `rows` (those after it carry the next Linear's scales too: expect_row_fold).
void expect_column_products(const LinearParams& before, CalibratingLinear& after, const std::vector<float>& f,
                            const std::vector<float>& f_after, int64_t rows = -1) {
  const int64_t in = before.in_features;
  bool scaled = false;
  for (int64_t r = 0; r < (rows < 0 ? before.out_features : rows); ++r) {
    for (int64_t j = 0; j < in; ++j) {
      const float want = before.weight[size_t(r * in + j)] * f[size_t(j)];
      ASSERT_NEAR(after.weight()[size_t(r * in + j)] * f_after[size_t(j)], want, 1e-5f * (std::fabs(want) + 1e-6f))
          << before.name << " [" << r << ", " << j << "]";
      scaled |= after.weight()[size_t(r * in + j)] != before.weight[size_t(r * in + j)];
    }
  }
  EXPECT_TRUE(scaled) << before.name << ": no scale chosen";
}

// The rows `first..` of producer (weights and bias) times the columns of consumer: unchanged, but for the
// producer's own columns' scales t (its input's: γ / γ').
void expect_row_fold(const LinearParams& prod, CalibratingLinear& prod_after, int64_t first, const LinearParams& cons,
                     CalibratingLinear& cons_after, const std::vector<float>& t) {
  const int64_t in = prod.in_features, n = cons.in_features;
  for (int64_t r = 0; r < cons.out_features; r += 5) {
    for (int64_t j = 0; j < n; ++j) {
      const float c = cons.weight[size_t(r * n + j)], c2 = cons_after.weight()[size_t(r * n + j)];
      for (int64_t k = 0; k < in; k += 3) {
        const float want = c * prod.weight[size_t((first + j) * in + k)] * t[size_t(k)];
        ASSERT_NEAR(c2 * prod_after.weight()[size_t((first + j) * in + k)], want, 1e-5f * (std::fabs(want) + 1e-6f))
            << cons.name;
      }
      if (!prod.bias.empty()) {
        const float want = c * prod.bias[size_t(first + j)];
        ASSERT_NEAR(c2 * prod_after.bias()[size_t(first + j)], want, 1e-5f * (std::fabs(want) + 1e-6f)) << cons.name;
      }
    }
  }
}

std::vector<float> ratio(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> r(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) r[i] = a[i] / b[i];
  return r;
}

TEST(AwqBlock, LlamaFoldsKeepEveryProduct) {
  const int64_t h = 64, inter = 96;
  Block b;
  auto attn = std::make_shared<InputStatistics>(), mlp = std::make_shared<InputStatistics>();
  AwqBlock a;
  a.q = b.add("q", h, h, false, attn, true), a.k = b.add("k", h, h, false, attn, false);
  a.v = b.add("v", h, h, true, attn, false);  // a bias, as Qwen2's
  a.o = b.add("o", h, h, false, std::make_shared<InputStatistics>(), true);
  a.gate = b.add("gate", inter, h, false, mlp, true), a.up = b.add("up", inter, h, false, mlp, false);
  a.down = b.add("down", h, inter, false, std::make_shared<InputStatistics>(), true);
  a.gated = true;
  a.attn_norm = {"attn_norm", gaussian(size_t(h), 5, 1.0f), {}};
  a.mlp_norm = {"mlp_norm", gaussian(size_t(h), 6, 1.0f), {}};
  const auto attn_gamma = a.attn_norm.gamma, mlp_gamma = a.mlp_norm.gamma;
  for (auto* l : {a.q, a.o, a.gate, a.down}) feed(*l, 7);
  ASSERT_TRUE(model::detail::scale_awq_block(a, {}));
  for (auto* l : {a.q, a.k}) expect_column_products(b.weights[l->shape().name], *l, attn_gamma, a.attn_norm.gamma);
  expect_column_products(b.weights["gate"], *a.gate, mlp_gamma, a.mlp_norm.gamma);
  expect_row_fold(b.weights["v"], *a.v, 0, b.weights["o"], *a.o, ratio(attn_gamma, a.attn_norm.gamma));
  expect_row_fold(b.weights["up"], *a.up, 0, b.weights["down"], *a.down, ratio(mlp_gamma, a.mlp_norm.gamma));
}

TEST(AwqBlock, Gpt2FoldsKeepEveryProduct) {
  const int64_t h = 64;
  Block b;
  AwqBlock a;
  a.qkv = b.add("c_attn", 3 * h, h, true, std::make_shared<InputStatistics>(), true);
  a.o = b.add("attn.c_proj", h, h, true, std::make_shared<InputStatistics>(), true);
  a.up = b.add("c_fc", 4 * h, h, true, std::make_shared<InputStatistics>(), true);
  a.down = b.add("mlp.c_proj", h, 4 * h, true, std::make_shared<InputStatistics>(), true);
  a.attn_norm = {"ln_1", gaussian(size_t(h), 5, 1.0f), gaussian(size_t(h), 8, 0.3f)};
  a.mlp_norm = {"ln_2", gaussian(size_t(h), 6, 1.0f), gaussian(size_t(h), 9, 0.3f)};
  const auto ln1 = a.attn_norm, ln2 = a.mlp_norm;
  for (auto* l : {a.qkv, a.o, a.up, a.down}) feed(*l, 7);
  const auto down_before = a.down->weight();
  ASSERT_TRUE(model::detail::scale_awq_block(a, {}));
  expect_column_products(b.weights["c_attn"], *a.qkv, ln1.gamma, a.attn_norm.gamma, 2 * h);
  expect_column_products(b.weights["c_attn"], *a.qkv, ln1.beta, a.attn_norm.beta, 2 * h);
  expect_column_products(b.weights["c_fc"], *a.up, ln2.gamma, a.mlp_norm.gamma);
  expect_column_products(b.weights["c_fc"], *a.up, ln2.beta, a.mlp_norm.beta);
  expect_row_fold(b.weights["c_attn"], *a.qkv, 2 * h, b.weights["attn.c_proj"], *a.o,
                  ratio(ln1.gamma, a.attn_norm.gamma));
  EXPECT_EQ(a.down->weight(), down_before) << "GELU between c_fc and c_proj: no scale folds through it";
}

}  // namespace

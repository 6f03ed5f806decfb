// The encoder's non-GEMM CUDA kernels (src/kernels/cuda/encoder_ops_cuda.h) against the CPU `_ref`
// twins. Without a GPU (or without the CUDA backend) the GPU tests skip with cuda_device_status()'s
// reason; the host-side limits run everywhere.
//
// Budgets, per element (every output is written: buffers are NaN-poisoned first):
//   embedding sum                  exact (the same two FP32 additions in the same order)
//   add + LayerNorm                5e-5·(1 + |ref|): FP32 mean and variance on the GPU, double in the twin
//   GELU (erf), tanh               2e-6·(1 + |ref|): CUDA's erff / tanhf are within 2 ulp of the true value
//   ReLU                           exact
//   attention (padding, causal)    1e-4·(Σ_t p_t·|v_t| + 1e-6): FP32 dot products, expf and sums vs double
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cuda/encoder_ops_cuda.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/encoder_ops.h"
#include "random_data.h"
#if QJOULE_HAVE_CUDA
#include "device_vector.h"
#endif

namespace qjoule::kernels {
namespace {

TEST(CudaEncoderOpsHost, AttentionSharedMemoryLimit) {
  using namespace cuda_detail;
  EXPECT_EQ(attention_shared_bytes(128, 64), (128 + 64) * sizeof(float));
  EXPECT_LE(attention_shared_bytes(512, 64), kAttentionMaxSharedBytes);    // BERT's longest sequence
  EXPECT_GT(attention_shared_bytes(16384, 64), kAttentionMaxSharedBytes);  // refused with a reason
  EXPECT_EQ(kAttentionThreads % 32, 0);
}

#if QJOULE_HAVE_CUDA

#define REQUIRE_GPU() QJOULE_REQUIRE_USABLE_GPU()
using test::Dev;
using test::kNaN;

TEST(CudaEncoderOps, EmbeddingSumMatchesTheCpuModelsSum) {
  REQUIRE_GPU();
  const int64_t vocab = 50, positions = 20, hidden = 37, batch = 3, seq = 7, rows = batch * seq;
  const auto word = test::random_vector(vocab * hidden, 1), position = test::random_vector(positions * hidden, 2),
             type0 = test::random_vector(hidden, 3);
  std::vector<int32_t> ids(rows);
  for (int64_t i = 0; i < rows; ++i) ids[i] = static_cast<int32_t>((i * 17 + 5) % vocab);
  for (const bool with_type : {false, true}) {
    Dev<int32_t> d_ids(ids);
    Dev<float> d_word(word), d_pos(position), d_type(type0), d_out(std::vector<float>(rows * hidden, kNaN));
    ASSERT_EQ(
        cuda_detail::embedding_sum_cuda(d_ids.get(), d_word.get(), d_pos.get(), nullptr,
                                        with_type ? d_type.get() : nullptr, rows, seq, hidden, d_out.get(), nullptr),
        "");
    const auto out = d_out.back();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < hidden; ++c) {
        float ref = word[ids[i] * hidden + c] + position[(i % seq) * hidden + c];
        if (with_type) ref += type0[c];
        ASSERT_EQ(out[i * hidden + c], ref) << i << "," << c;
      }
  }
}

TEST(CudaEncoderOps, AddLayerNormMatchesRef) {
  REQUIRE_GPU();
  for (const int64_t cols : {32, 768, 1000, 4099}) {
    const int64_t rows = 9;
    auto x = test::random_vector(rows * cols, 10, 3.0f);
    for (int64_t c = 0; c < cols; ++c) x[c] += 100.0f;  // a row far from zero mean
    const auto res = test::random_vector(rows * cols, 11), gamma = test::random_vector(cols, 12),
               beta = test::random_vector(cols, 13);
    for (const bool with_residual : {false, true}) {
      std::vector<float> ref = x;
      add_layer_norm_f32_ref(ref.data(), with_residual ? res.data() : nullptr, rows, cols, gamma.data(), beta.data(),
                             1e-12f);
      Dev<float> d_x(x), d_res(res), d_gamma(gamma), d_beta(beta);
      ASSERT_EQ(cuda_detail::add_layer_norm_cuda(d_x.get(), with_residual ? d_res.get() : nullptr, rows, cols,
                                                 d_gamma.get(), d_beta.get(), 1e-12f, nullptr),
                "");
      const auto out = d_x.back();
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 5e-5 * (1.0 + std::fabs(ref[i]))) << "cols " << cols << " at " << i;
    }
  }
}

TEST(CudaEncoderOps, ElementwiseActivationsMatchTheCpu) {
  REQUIRE_GPU();
  auto x = test::random_vector(100003, 20, 4.0f);
  for (float e : {0.0f, -0.0f, 20.0f, -20.0f, 1e-30f}) x.push_back(e);
  std::vector<float> gelu = x, relu = x, tanh = x;
  gelu_erf_f32_ref(gelu.data(), static_cast<int64_t>(gelu.size()));
  relu_f32(relu.data(), static_cast<int64_t>(relu.size()));
  tanh_f32(tanh.data(), static_cast<int64_t>(tanh.size()));
  const auto n = static_cast<int64_t>(x.size());
  Dev<float> d_gelu(x), d_relu(x), d_tanh(x);
  ASSERT_EQ(cuda_detail::gelu_erf_cuda(d_gelu.get(), n, nullptr), "");
  ASSERT_EQ(cuda_detail::relu_cuda(d_relu.get(), n, nullptr), "");
  ASSERT_EQ(cuda_detail::tanh_cuda(d_tanh.get(), n, nullptr), "");
  const auto g = d_gelu.back(), r = d_relu.back(), t = d_tanh.back();
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(g[i], gelu[i], 2e-6 * (1.0 + std::fabs(gelu[i]))) << x[i];
    ASSERT_EQ(r[i], relu[i]) << x[i];
    ASSERT_NEAR(t[i], tanh[i], 2e-6 * (1.0 + std::fabs(tanh[i]))) << x[i];
  }
}

// Softmax attention in double, with an optional causal mask: the twin attention_f32_ref is for the
// padding mask only, so the causal case is checked against this (which equals the twin without it).
std::vector<double> attention_double(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, int64_t stride, const std::vector<int32_t>& mask,
                                     bool causal, int64_t batch, int64_t seq, int64_t heads, int64_t hd,
                                     std::vector<double>& bound) {
  std::vector<double> ctx(static_cast<std::size_t>(batch * seq * heads * hd), 0.0);
  bound.assign(ctx.size(), 0.0);
  std::vector<double> p(static_cast<std::size_t>(seq));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < seq; ++s) {
        double mx = -1e300, sum = 0.0;
        for (int64_t t = 0; t < seq; ++t) {
          const bool visible = mask[b * seq + t] != 0 && (!causal || t <= s);
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d)
            dot += double(q[(b * seq + s) * stride + h * hd + d]) * k[(b * seq + t) * stride + h * hd + d];
          p[t] = visible ? dot / std::sqrt(double(hd)) : -1e300;
          if (visible) mx = std::max(mx, p[t]);
        }
        for (int64_t t = 0; t < seq; ++t) {
          p[t] = p[t] == -1e300 ? 0.0 : std::exp(p[t] - mx);
          sum += p[t];
        }
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0.0, mag = 0.0;
          for (int64_t t = 0; t < seq; ++t) {
            const double vv = v[(b * seq + t) * stride + h * hd + d];
            acc += sum > 0 ? p[t] / sum * vv : 0.0;
            mag += sum > 0 ? p[t] / sum * std::fabs(vv) : 0.0;
          }
          const auto at = static_cast<std::size_t>((b * seq + s) * heads * hd + h * hd + d);
          ctx[at] = acc;
          bound[at] = mag;
        }
      }
  return ctx;
}

struct AttentionCase {
  int64_t batch, seq, heads, head_dim;
  bool fused;  // q, k, v as thirds of one [rows, 3·hidden] tensor (stride 3·hidden)
  bool causal;
};

class CudaAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(CudaAttention, MatchesTheTwinWithPaddingAndCausalMasks) {
  REQUIRE_GPU();
  const AttentionCase& c = GetParam();
  const int64_t hidden = c.heads * c.head_dim, rows = c.batch * c.seq;
  const int64_t stride = c.fused ? 3 * hidden : hidden;
  auto qkv = test::random_vector(rows * 3 * hidden, 30);
  // Separate q, k, v tensors (stride hidden), or thirds of the fused one.
  std::vector<float> q(rows * stride), k(rows * stride), v(rows * stride);
  if (c.fused) {
    q = k = v = qkv;
  } else {
    for (int64_t i = 0; i < rows * hidden; ++i) {
      q[i] = qkv[i];
      k[i] = qkv[rows * hidden + i];
      v[i] = qkv[2 * rows * hidden + i];
    }
  }
  const int64_t k_off = c.fused ? hidden : 0, v_off = c.fused ? 2 * hidden : 0;
  std::vector<float> kk(k.begin() + k_off, k.end()), vv(v.begin() + v_off, v.end());
  kk.resize(k.size(), 0.0f);
  vv.resize(v.size(), 0.0f);
  // Sequence 0: every token real; 1: padded after 3 tokens; 2: all padding (ctx 0); then real again.
  std::vector<int32_t> mask(rows, 1);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = 0; t < c.seq; ++t) {
      if (b % 4 == 1 && t >= 3) mask[b * c.seq + t] = 0;
      if (b % 4 == 2) mask[b * c.seq + t] = 0;
    }
  std::vector<double> bound;
  const auto ref = attention_double(q, kk, vv, stride, mask, c.causal, c.batch, c.seq, c.heads, c.head_dim, bound);
  if (!c.causal) {  // the model's case: the CPU twin itself agrees with the double reference
    std::vector<float> twin(rows * hidden);
    attention_f32_ref(q.data(), kk.data(), vv.data(), stride, mask.data(), c.batch, c.seq, c.heads, c.head_dim,
                      twin.data());
    for (std::size_t i = 0; i < twin.size(); ++i) ASSERT_NEAR(twin[i], ref[i], 1e-5 * (bound[i] + 1e-6)) << i;
  }
  Dev<float> d_q(c.fused ? qkv : q), d_k(c.fused ? qkv : k), d_v(c.fused ? qkv : v);
  Dev<int32_t> d_mask(mask);
  Dev<float> d_ctx(std::vector<float>(rows * hidden, kNaN));
  ASSERT_EQ(cuda_detail::attention_cuda(d_q.get(), d_k.get() + k_off, d_v.get() + v_off, stride, d_mask.get(), c.causal,
                                        c.batch, c.seq, c.heads, c.head_dim, d_ctx.get(), nullptr),
            "");
  const auto out = d_ctx.back();
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-4 * (bound[i] + 1e-6)) << "at " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttentionCase{4, 12, 4, 8, false, false},      // tiny-bert's heads
                                           AttentionCase{4, 12, 4, 8, true, false},       // fused Q, K, V
                                           AttentionCase{2, 128, 12, 64, true, false},    // DistilBERT-base
                                           AttentionCase{3, 37, 2, 48, false, true},      // causal, odd sizes
                                           AttentionCase{1, 1, 1, 64, false, false},      // one token
                                           AttentionCase{5, 300, 2, 100, false, false}),  // head_dim > 32·3
                         [](const ::testing::TestParamInfo<AttentionCase>& case_info) {
                           const AttentionCase& c = case_info.param;
                           std::ostringstream name;
                           name << 'b' << c.batch << "_s" << c.seq << "_h" << c.heads << "_d" << c.head_dim
                                << (c.fused ? "_fused" : "") << (c.causal ? "_causal" : "");
                           return name.str();
                         });

TEST(CudaEncoderOps, AttentionRefusesWhatItCannotHold) {
  REQUIRE_GPU();
  EXPECT_THAT(
      cuda_detail::attention_cuda(nullptr, nullptr, nullptr, 64, nullptr, false, 1, 20000, 1, 64, nullptr, nullptr),
      ::testing::HasSubstr("bytes of shared memory"));
  EXPECT_THAT(cuda_detail::attention_cuda(nullptr, nullptr, nullptr, 32, nullptr, false, 1, 8, 2, 32, nullptr, nullptr),
              ::testing::HasSubstr("does not fit a row stride of 32"));
}

#endif  // QJOULE_HAVE_CUDA

}  // namespace
}  // namespace qjoule::kernels

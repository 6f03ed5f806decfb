// The decoder's decode-step CUDA kernels (decode_attention_cuda.h, decoder_ops_cuda.h) against the CPU
// twins. Without a GPU (or without the CUDA backend) the GPU tests skip with cuda_device_status()'s
// reason; the launch plans run everywhere.
//
// Budgets, per element (every output is written: buffers are NaN-poisoned first):
//   decode attention    1e-4·(Σ_j p_j·|v_j| + 1e-6) against causal_attention_f32_ref: FP32 dot
//                       products, expf and the chunks' rescaled sums vs the twin's order
//   add + RMSNorm       x exact (one FP32 add); out 5e-5·(1 + |ref|) (FP32 sum of squares vs double)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cuda/decode_attention_cuda.h"
#include "kernels/cuda/decoder_ops_cuda.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/decoder_ops.h"
#include "random_data.h"
#if QJOULE_HAVE_CUDA
#include "device_vector.h"
#endif

namespace qjoule::kernels {
namespace {

using ::testing::HasSubstr;

TEST(CudaDecoderOpsHost, DecodeAttentionPlanFitsSharedMemoryAndCoversEveryKey) {
  using cuda_detail::decode_attention_plan;
  // TinyLlama: 32 heads over 4 kv heads of 64, 192 keys: chunks of 16 keys (48 blocks, not 12).
  const auto p = decode_attention_plan(32, 4, 64, 192);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_EQ(p.chunk, 16);
  EXPECT_EQ(p.splits, 12);
  EXPECT_EQ(p.shared_bytes, (2 * 16 * 65 + 8 * 64 + 8 * 16) * sizeof(float));
  EXPECT_EQ(p.scratch_floats, 32 * 12 * 66);
  // Longer contexts: chunks grow to keep at most 64 of them, up to 64 keys.
  EXPECT_EQ(decode_attention_plan(32, 4, 64, 2048).chunk, 32);
  EXPECT_EQ(decode_attention_plan(32, 4, 64, 2049).chunk, 64);
  EXPECT_EQ(decode_attention_plan(32, 4, 64, 32768).splits, 512);
  for (const int64_t keys : {1, 63, 64, 65, 2048, 32768}) {
    const auto q = decode_attention_plan(28, 4, 128, keys);  // Qwen2-7B's heads
    ASSERT_TRUE(q.fits) << q.why;
    EXPECT_LE(q.shared_bytes, 48u * 1024);
    EXPECT_GE(q.splits * q.chunk, keys);
    EXPECT_LT((q.splits - 1) * q.chunk, keys);
  }
  EXPECT_EQ(decode_attention_plan(12, 12, 64, 10).chunk, 16);  // GPT-2: one query head a kv head
  const auto big = decode_attention_plan(512, 1, 256, 8);      // 512 query heads on one kv head
  EXPECT_FALSE(big.fits);
  EXPECT_THAT(big.why, HasSubstr("more than 48 KiB"));
  EXPECT_FALSE(decode_attention_plan(32, 5, 64, 8).fits);  // heads not a multiple of kv heads
}

#if QJOULE_HAVE_CUDA

#define REQUIRE_GPU() QJOULE_REQUIRE_USABLE_GPU()
using test::Dev;
using test::kNaN;

struct DecodeCase {
  int64_t heads, kv_heads, head_dim, past, capacity;
  bool device_position;
  int64_t window = 0;  // a sliding window's keys (0: all)
};

TEST(CudaDecoderOps, DecodeAttentionMatchesTheCpuTwin) {
  REQUIRE_GPU();
  for (const DecodeCase c : {DecodeCase{32, 4, 64, 0, 8, false}, DecodeCase{32, 4, 64, 191, 192, true},
                             DecodeCase{4, 2, 32, 63, 200, true}, DecodeCase{4, 2, 32, 64, 65, false},
                             DecodeCase{12, 12, 64, 299, 300, false}, DecodeCase{28, 4, 128, 2047, 2048, true},
                             DecodeCase{4, 2, 32, 63, 200, true, 16}, DecodeCase{32, 4, 64, 191, 192, false, 50},
                             DecodeCase{4, 1, 256, 40, 64, true, 8}, DecodeCase{8, 2, 64, 5, 64, false, 8}}) {
    SCOPED_TRACE(std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads of " +
                 std::to_string(c.head_dim) + ", past " + std::to_string(c.past) + ", window " +
                 std::to_string(c.window));
    const int64_t kvd = c.kv_heads * c.head_dim, keys = c.past + 1;
    const int64_t first = c.window > 0 && keys > c.window ? keys - c.window : 0;
    const auto q = test::random_vector(static_cast<std::size_t>(c.heads * c.head_dim), 1);
    const auto k = test::random_vector(static_cast<std::size_t>(c.capacity * kvd), 2);
    const auto v = test::random_vector(static_cast<std::size_t>(c.capacity * kvd), 3);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> ref(static_cast<std::size_t>(c.heads * c.head_dim));
    causal_attention_f32_ref(q.data(), c.heads * c.head_dim, k.data(), v.data(), kvd, c.past, 1, c.heads, c.kv_heads,
                             c.head_dim, scale, ref.data(), c.window);
    const auto plan = cuda_detail::decode_attention_plan(
        c.heads, c.kv_heads, c.head_dim,
        cuda_detail::decode_attention_keys(c.past, c.device_position, c.capacity, c.window));
    ASSERT_TRUE(plan.fits) << plan.why;
    Dev<float> dq(q), dk(k), dv(v), dctx(std::vector<float>(ref.size(), kNaN)),
        scratch(std::vector<float>(static_cast<std::size_t>(plan.scratch_floats), kNaN));
    Dev<int32_t> position(std::vector<int32_t>{static_cast<int32_t>(c.past)});
    // With the position on the device, the host's is wrong on purpose: the kernels must read theirs.
    ASSERT_EQ(cuda_detail::decode_attention_cuda(dq.get(), dk.get(), dv.get(), kvd, c.device_position ? 0 : c.past,
                                                 c.device_position ? position.get() : nullptr, c.capacity, c.heads,
                                                 c.kv_heads, c.head_dim, scale, scratch.get(), plan.scratch_floats,
                                                 dctx.get(), c.window, nullptr),
              "");
    const auto out = dctx.back();
    const int64_t group = c.heads / c.kv_heads;
    for (int64_t h = 0; h < c.heads; ++h) {
      // The budget's scale: Σ_j p_j·|v_j| per channel, from the twin's own softmax in double.
      std::vector<double> p(static_cast<std::size_t>(keys), 0.0);
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = first; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < c.head_dim; ++d)
          dot += double(q[h * c.head_dim + d]) * k[j * kvd + (h / group) * c.head_dim + d];
        p[j] = dot * scale;
        m = std::max(m, p[j]);
      }
      for (int64_t j = first; j < keys; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int64_t d = 0; d < c.head_dim; ++d) {
        double bound = 0.0;
        for (int64_t j = 0; j < keys; ++j) bound += p[j] / sum * std::fabs(v[j * kvd + (h / group) * c.head_dim + d]);
        const std::size_t i = static_cast<std::size_t>(h * c.head_dim + d);
        ASSERT_NEAR(out[i], ref[i], 1e-4 * (bound + 1e-6)) << "head " << h << " channel " << d;
      }
    }
  }
}

TEST(CudaDecoderOps, AddRmsNormAddsTheResidualThenNormalizes) {
  REQUIRE_GPU();
  // 2048: every value kept in registers between the passes; 8192: half of them read again; 37, 4099: scalar.
  for (const int64_t cols : {2048, 8192, 37, 4099}) {
    const int64_t rows = 3;
    const auto x = test::random_vector(static_cast<std::size_t>(rows * cols), 4);
    const auto r = test::random_vector(static_cast<std::size_t>(rows * cols), 5);
    const auto g = test::random_vector(static_cast<std::size_t>(cols), 6);
    std::vector<float> sum(x.size()), ref(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + r[i];
    rms_norm_f32_ref(sum.data(), rows, cols, g.data(), 1e-5f, ref.data());
    Dev<float> dx(x), dr(r), dg(g);
    // out = the residual, as the decoder calls it.
    ASSERT_EQ(cuda_detail::add_rms_norm_cuda(dx.get(), dr.get(), rows, cols, dg.get(), 1e-5f, dr.get(), nullptr), "");
    const auto new_x = dx.back(), out = dr.back();
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(new_x[i], sum[i]) << cols << " at " << i;
      ASSERT_NEAR(out[i], ref[i], 5e-5 * (1.0 + std::fabs(ref[i]))) << cols << " at " << i;
    }
  }
}

// A mixture's weighted add of an expert's rows (GraphOps::add_scaled): the CPU backend's one product and one
// add, bit for bit, on both forms (the first expert a token meets writes, the next ones add).
TEST(CudaDecoderOps, AddScaledIsTheCpuBackendsProductThenAdd) {
  REQUIRE_GPU();
  for (const int64_t n : {1, 37, 4099}) {
    const auto x = test::random_vector(static_cast<std::size_t>(n), 7);
    const auto y = test::random_vector(static_cast<std::size_t>(n), 8);
    const float alpha = 0.3719f;
    for (const bool accumulate : {false, true}) {
      std::vector<float> want(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float scaled = alpha * y[i];
        want[i] = accumulate ? x[i] + scaled : scaled;
      }
      Dev<float> dx(x), dy(y);
      ASSERT_EQ(cuda_detail::add_scaled_cuda(dx.get(), dy.get(), alpha, n, accumulate, nullptr), "");
      const auto got = dx.back();
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], want[i]) << n << " " << accumulate << " at " << i;
    }
  }
}

// Qwen3's per-head RMSNorm: every head of fused q | k | v rows (the v part untouched) and of a plain
// block of heads, against head_rms_norm_f32_ref, float4 and scalar paths (head_dim 128, 32; 13).
TEST(CudaDecoderOps, HeadRmsNormNormalizesEveryHeadInPlace) {
  REQUIRE_GPU();
  struct Case {
    int64_t n, heads, head_dim, row_stride;
  };
  for (const Case c : {Case{3, 16, 128, 16 * 128 + 2 * 8 * 128}, Case{1, 4, 32, 4 * 32}, Case{5, 2, 13, 2 * 13 + 7}}) {
    const auto x = test::random_vector(static_cast<std::size_t>(c.n * c.row_stride), 7);
    const auto g = test::random_vector(static_cast<std::size_t>(c.head_dim), 8);
    std::vector<float> ref = x;
    head_rms_norm_f32_ref(ref.data(), c.n, c.row_stride, c.heads, c.head_dim, g.data(), 1e-6f);
    Dev<float> dx(x), dg(g);
    ASSERT_EQ(
        cuda_detail::head_rms_norm_cuda(dx.get(), c.n, c.row_stride, c.heads, c.head_dim, dg.get(), 1e-6f, nullptr),
        "");
    const auto got = dx.back();
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 5e-5 * (1.0 + std::fabs(ref[i]))) << c.head_dim << " at " << i;
  }
}

// The fused RoPE + KV store equals rope_cuda then store_kv_cuda bit for bit (the same arithmetic per
// pair), for a TinyLlama-shaped row (32 q heads, 4 kv heads of 64) and a small odd one, 1 and 3 tokens,
// with the position as an argument or on the device (then the host's is wrong on purpose).
TEST(CudaDecoderOps, RopeStoreKvEqualsRopeThenStoreKv) {
  REQUIRE_GPU();
  struct Case {
    int64_t q_heads, kv_heads, half, n, past;
    bool device_position;
  };
  for (const Case c : {Case{32, 4, 32, 1, 130, true}, Case{32, 4, 32, 3, 7, false}, Case{6, 2, 3, 2, 0, true}}) {
    SCOPED_TRACE(std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) + " heads, " + std::to_string(c.n) +
                 " tokens after " + std::to_string(c.past));
    const int64_t head_dim = 2 * c.half, qd = c.q_heads * head_dim, kvd = c.kv_heads * head_dim;
    const int64_t row = qd + 2 * kvd + 5, capacity = c.past + c.n + 2, kv_stride = kvd + 3;
    const auto x = test::random_vector(static_cast<std::size_t>(c.n * row), 7);
    std::vector<float> inv_freq(static_cast<std::size_t>(c.half));
    for (int64_t i = 0; i < c.half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(head_dim));
    const std::vector<float> cache(static_cast<std::size_t>(capacity * kv_stride), kNaN);
    Dev<float> x1(x), x2(x), f(inv_freq), k1(cache), v1(cache), k2(cache), v2(cache);
    Dev<int32_t> position(std::vector<int32_t>{static_cast<int32_t>(c.past)});
    const int32_t* pos = c.device_position ? position.get() : nullptr;
    const int64_t host_past = c.device_position ? 0 : c.past;
    ASSERT_EQ(cuda_detail::rope_cuda(x1.get(), c.n, row, c.q_heads + c.kv_heads, c.half, head_dim, host_past, pos,
                                     f.get(), 1.25f, nullptr),
              "");
    ASSERT_EQ(cuda_detail::store_kv_cuda(x1.get() + qd, x1.get() + qd + kvd, row, k1.get(), v1.get(), kv_stride,
                                         host_past, pos, c.n, kvd, nullptr),
              "");
    ASSERT_EQ(cuda_detail::rope_store_kv_cuda(x2.get(), c.n, row, c.q_heads, c.kv_heads, c.half, host_past, pos,
                                              f.get(), 1.25f, k2.get(), v2.get(), kv_stride, nullptr),
              "");
    const auto a = x1.back(), b = x2.back(), ka = k1.back(), kb = k2.back(), va = v1.back(), vb = v2.back();
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << "row value " << i;
    for (std::size_t i = 0; i < ka.size(); ++i) {  // NaN where neither writes: compared as bits
      ASSERT_EQ(std::memcmp(&ka[i], &kb[i], 4), 0) << "key cache " << i;
      ASSERT_EQ(std::memcmp(&va[i], &vb[i], 4), 0) << "value cache " << i;
    }
    EXPECT_FALSE(std::isnan(kb[static_cast<std::size_t>(c.past * kv_stride)]));  // written at the position
  }
}

// A partial rotary factor (Phi-3: heads of 128 turning 96 values): rope_cuda turns each head's first
// 2·half values as the CPU's apply_rope_f32 does and leaves the rest as they were.
TEST(CudaDecoderOps, PartialRopeTurnsTheFirstValuesOfEachHead) {
  REQUIRE_GPU();
  const int64_t heads = 5, head_dim = 40, half = 12, n = 3, row = heads * head_dim + 3, first = 17;
  const auto x = test::random_vector(static_cast<std::size_t>(n * row), 8);
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(10000.0f, -2.0f * float(i) / float(2 * half));
  Dev<float> dx(x), f(inv_freq);
  ASSERT_EQ(cuda_detail::rope_cuda(dx.get(), n, row, heads, half, head_dim, first, nullptr, f.get(), 1.1f, nullptr),
            "");
  auto ref = x;
  apply_rope_f32(ref.data(), n, row, heads, first, inv_freq.data(), head_dim, 1.1f, 2 * half);
  const auto got = dx.back();
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 2e-6 * (1.0 + std::fabs(ref[i]))) << i;
  for (int64_t h = 0; h < heads; ++h)  // the values past the rotary dimension untouched
    for (int64_t d = 2 * half; d < head_dim; ++d) ASSERT_EQ(got[h * head_dim + d], x[h * head_dim + d]);
}

#endif  // QJOULE_HAVE_CUDA

}  // namespace
}  // namespace qjoule::kernels

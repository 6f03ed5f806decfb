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
  // TinyLlama: 32 heads over 4 kv heads of 64: chunks of 64 keys, 36 KiB of shared memory.
  const auto p = decode_attention_plan(32, 4, 64, 192);
  ASSERT_TRUE(p.fits) << p.why;
  EXPECT_EQ(p.chunk, 64);
  EXPECT_EQ(p.splits, 3);
  EXPECT_EQ(p.shared_bytes, (2 * 64 * 65 + 8 * 64 + 8 * 64) * sizeof(float));
  EXPECT_EQ(p.scratch_floats, 32 * 3 * 66);
  for (const int64_t keys : {1, 63, 64, 65, 2048, 32768}) {
    const auto q = decode_attention_plan(28, 4, 128, keys);  // Qwen2-7B's heads
    ASSERT_TRUE(q.fits) << q.why;
    EXPECT_LE(q.shared_bytes, 48u * 1024);
    EXPECT_GE(q.splits * q.chunk, keys);
    EXPECT_LT((q.splits - 1) * q.chunk, keys);
  }
  EXPECT_EQ(decode_attention_plan(12, 12, 64, 10).chunk, 64);  // GPT-2: one query head a kv head
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
};

TEST(CudaDecoderOps, DecodeAttentionMatchesTheCpuTwin) {
  REQUIRE_GPU();
  for (const DecodeCase c : {DecodeCase{32, 4, 64, 0, 8, false}, DecodeCase{32, 4, 64, 191, 192, true},
                             DecodeCase{4, 2, 32, 63, 200, true}, DecodeCase{4, 2, 32, 64, 65, false},
                             DecodeCase{12, 12, 64, 299, 300, false}, DecodeCase{28, 4, 128, 2047, 2048, true}}) {
    SCOPED_TRACE(std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads of " +
                 std::to_string(c.head_dim) + ", past " + std::to_string(c.past));
    const int64_t kvd = c.kv_heads * c.head_dim, keys = c.past + 1;
    const auto q = test::random_vector(static_cast<std::size_t>(c.heads * c.head_dim), 1);
    const auto k = test::random_vector(static_cast<std::size_t>(c.capacity * kvd), 2);
    const auto v = test::random_vector(static_cast<std::size_t>(c.capacity * kvd), 3);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> ref(static_cast<std::size_t>(c.heads * c.head_dim));
    causal_attention_f32_ref(q.data(), c.heads * c.head_dim, k.data(), v.data(), kvd, c.past, 1, c.heads, c.kv_heads,
                             c.head_dim, scale, ref.data());
    const auto plan =
        cuda_detail::decode_attention_plan(c.heads, c.kv_heads, c.head_dim, c.device_position ? c.capacity : keys);
    ASSERT_TRUE(plan.fits) << plan.why;
    Dev<float> dq(q), dk(k), dv(v), dctx(std::vector<float>(ref.size(), kNaN)),
        scratch(std::vector<float>(static_cast<std::size_t>(plan.scratch_floats), kNaN));
    Dev<int32_t> position(std::vector<int32_t>{static_cast<int32_t>(c.past)});
    // With the position on the device, the host's is wrong on purpose: the kernels must read theirs.
    ASSERT_EQ(cuda_detail::decode_attention_cuda(dq.get(), dk.get(), dv.get(), kvd, c.device_position ? 0 : c.past,
                                                 c.device_position ? position.get() : nullptr, c.capacity, c.heads,
                                                 c.kv_heads, c.head_dim, scale, scratch.get(), plan.scratch_floats,
                                                 dctx.get(), nullptr),
              "");
    const auto out = dctx.back();
    const int64_t group = c.heads / c.kv_heads;
    for (int64_t h = 0; h < c.heads; ++h) {
      // The budget's scale: Σ_j p_j·|v_j| per channel, from the twin's own softmax in double.
      std::vector<double> p(static_cast<std::size_t>(keys));
      double m = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < c.head_dim; ++d)
          dot += double(q[h * c.head_dim + d]) * k[j * kvd + (h / group) * c.head_dim + d];
        p[j] = dot * scale;
        m = std::max(m, p[j]);
      }
      for (auto& e : p) sum += (e = std::exp(e - m));
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
  for (const int64_t cols : {2048, 37, 4099}) {
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

#endif  // QJOULE_HAVE_CUDA

}  // namespace
}  // namespace qjoule::kernels

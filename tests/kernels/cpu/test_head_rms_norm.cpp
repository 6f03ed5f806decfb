// Qwen3's per-head RMSNorm of q and k (kernels::head_rms_norm_f32) against its scalar twin: every head
// of n rows normalized in place, values outside the heads (the rest of a fused q | k | v row) untouched.
// Budget: 1e-6 relative per value (the same double sums, FP32 products in another order).
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/decoder_ops.h"
#include "random_data.h"

namespace {

using namespace qjoule::kernels;

TEST(HeadRmsNorm, EveryHeadOfEveryRowInPlaceAndNothingElse) {
  struct Case {
    int64_t n, heads, head_dim, row_stride;
  };
  for (const Case c : {Case{7, 4, 32, 4 * 32 + 2 * 2 * 32}, Case{1, 16, 128, 16 * 128}, Case{600, 2, 13, 2 * 13 + 5}}) {
    const auto x = qjoule::test::random_vector(static_cast<std::size_t>(c.n * c.row_stride), 3);
    const auto g = qjoule::test::random_vector(static_cast<std::size_t>(c.head_dim), 4);
    std::vector<float> got = x, ref = x;
    head_rms_norm_f32(got.data(), c.n, c.row_stride, c.heads, c.head_dim, g.data(), 1e-6f);
    head_rms_norm_f32_ref(ref.data(), c.n, c.row_stride, c.heads, c.head_dim, g.data(), 1e-6f);
    for (int64_t t = 0; t < c.n; ++t) {
      for (int64_t j = 0; j < c.row_stride; ++j) {
        const auto i = static_cast<std::size_t>(t * c.row_stride + j);
        if (j >= c.heads * c.head_dim) {
          ASSERT_EQ(got[i], x[i]) << "row " << t << " column " << j << " is not a head's";
        } else {
          ASSERT_NEAR(got[i], ref[i], 1e-6 * (1.0 + std::fabs(ref[i]))) << "row " << t << " column " << j;
        }
      }
    }
    // One head by hand: mean of squares 1 after the norm, for gamma 1.
    std::vector<float> one(static_cast<std::size_t>(c.head_dim), 2.0f), ones(one.size(), 1.0f);
    head_rms_norm_f32(one.data(), 1, c.head_dim, 1, c.head_dim, ones.data(), 0.0f);
    EXPECT_NEAR(one[0], 1.0f, 1e-6f);
  }
}

}  // namespace

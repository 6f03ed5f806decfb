// oneDNN FP32 linear vs the scalar reference. Budget: 1e-5 relative to the row's |x|·|w| scale.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "random_data.h"

#include "qjoule/kernels/linear.h"

namespace {

using qjoule::test::random_vector;

TEST(LinearF32OneDnn, MatchesReferenceAcrossShapes) {
  for (auto [m, out, in] : {std::tuple{1, 7, 5}, {13, 64, 48}, {128, 96, 256}, {3, 1, 1}}) {
    auto x = random_vector(size_t(m) * in, 1);
    auto w = random_vector(size_t(out) * in, 2);
    auto b = random_vector(size_t(out), 3);
    for (bool with_bias : {false, true}) {
      auto lin = qjoule::kernels::make_linear_f32_onednn(w.data(), with_bias ? b.data() : nullptr, out, in);
      std::vector<float> y(size_t(m) * out), ref(size_t(m) * out);
      lin->forward(x.data(), m, y.data());
      qjoule::kernels::linear_f32_ref(x.data(), m, w.data(), with_bias ? b.data() : nullptr, out, in, ref.data());
      const float budget = 1e-5f * std::sqrt(float(in)) * 4.0f;
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], budget) << "m=" << m << " i=" << i;
      EXPECT_EQ(lin->format(), "fp32");
      // oneDNN, after qjoule's AVX-512 GEMV for m <= 4 where the CPU has one (test_gemv_dense_avx512).
      EXPECT_NE(lin->kernel_path().find("onednn:"), std::string::npos) << lin->kernel_path();
      EXPECT_EQ(lin->bytes_held(), (size_t(out) * in + (with_bias ? out : 0)) * sizeof(float));
    }
  }
}

}  // namespace

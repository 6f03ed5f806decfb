// BF16 linear layer on every kernel this CPU can run, against its scalar twin and FP32.
// Budgets (per element, computed from the data; u = 2^-24 is FP32's unit roundoff):
//   vs linear_bf16_ref (same BF16-rounded inputs, double accumulation): K·u·Σ|x̂ŵ| + |b|·u — the
//     worst-case FP32 summation error, the only difference allowed.
//   vs FP32 on unrounded inputs: 2^-7·Σ|xw| (two BF16 roundings of relative ≤ 2^-8 each) + the above.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "random_data.h"

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemm_bf16_avx2.h"
#include "kernels/cpu/linear_bf16_kernels.h"
#include "qjoule/error.h"
#include "qjoule/kernels/linear_onednn_lowp.h"

namespace {

using namespace qjoule::kernels;

using qjoule::test::random_vector;

std::vector<Bf16Kernel> runnable_kernels() {
  std::vector<Bf16Kernel> kernels{Bf16Kernel::scalar};
  if (cpu_has_avx2_fma()) kernels.push_back(Bf16Kernel::avx2);
  if (onednn_has_native_bf16_matmul()) kernels.push_back(Bf16Kernel::onednn);
  return kernels;
}

TEST(LinearBf16, EveryKernelMatchesReferenceWithinBudget) {
  const float u = std::ldexp(1.0f, -24);
  // Shapes cover row tails (1..6-row micro-tiles, >48-row tiles), column tails (not a multiple of
  // 16) and k tails (not a multiple of the 256 block).
  for (auto [m, out, in] : {std::tuple<int64_t, int64_t, int64_t>{1, 7, 5},
                            {13, 64, 48},
                            {50, 130, 300},
                            {3, 1, 1},
                            {7, 17, 600},
                            {128, 96, 256},
                            {300, 40, 72}}) {  // one whole FP32 panel (kWholePanelMinRows)
    auto x = random_vector(size_t(m * in), 1);
    auto w = random_vector(size_t(out * in), 2);
    auto b = random_vector(size_t(out), 3);
    for (Bf16Kernel kernel : runnable_kernels()) {
      for (bool with_bias : {false, true}) {
        const float* bias = with_bias ? b.data() : nullptr;
        auto lin = make_linear_bf16_on(kernel, w.data(), bias, out, in, "test.weight");
        std::vector<float> y(size_t(m * out)), ref(y.size()), f32(y.size());
        lin->forward(x.data(), m, y.data());
        linear_bf16_ref(x.data(), m, w.data(), bias, out, in, ref.data());
        linear_f32_ref(x.data(), m, w.data(), bias, out, in, f32.data());
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < out; ++j) {
            float rounded = 0.0f, exact = 0.0f;
            for (int64_t k = 0; k < in; ++k) {
              rounded += std::fabs(round_to_bf16(x[size_t(i * in + k)]) * round_to_bf16(w[size_t(j * in + k)]));
              exact += std::fabs(x[size_t(i * in + k)] * w[size_t(j * in + k)]);
            }
            const float bias_term = with_bias ? std::fabs(b[size_t(j)]) * u : 0.0f;
            const float accumulation = float(in + 1) * u * rounded + bias_term;
            const size_t e = size_t(i * out + j);
            ASSERT_NEAR(y[e], ref[e], accumulation) << lin->kernel_path() << " m=" << m << " i=" << i << " j=" << j;
            ASSERT_NEAR(y[e], f32[e], std::ldexp(1.0f, -7) * exact + accumulation) << lin->kernel_path();
          }
        }
        EXPECT_EQ(lin->format(), "bf16");
        if (kernel == Bf16Kernel::avx2) {
          EXPECT_EQ(lin->kernel_path(), "qjoule:avx2:bf16w_bf16a_f32acc");
          EXPECT_EQ(lin->bytes_held(),
                    size_t((out + 15) / 16 * 16) * size_t(in) * 2 + size_t((out + 15) / 16 * 16) * 4);
        } else if (kernel == Bf16Kernel::scalar) {
          EXPECT_EQ(lin->kernel_path(), "qjoule:scalar:bf16w_bf16a_f32acc");
          EXPECT_EQ(lin->bytes_held(), size_t(out * in) * 2 + (with_bias ? size_t(out) * 4 : 0));
        } else {
          // oneDNN, after qjoule's AVX512_BF16 GEMV for m <= 4 where the CPU has one: its BF16 matmul, or
          // (where that does not beat FP32 here) FP32 panels of the widened BF16 weights.
          const std::string& path = lin->kernel_path();
          EXPECT_NE(path.find("onednn:"), std::string::npos) << path;
          EXPECT_TRUE(path.ends_with(":bf16bf16f32") ||
                      (path.find(",m>4:f32_panel+onednn:") != std::string::npos && path.ends_with(":f32")))
              << path;
        }
      }
    }
  }
}

TEST(LinearBf16, ActivationsAndWeightsReallyAreBf16) {
  // 1 + 2^-10 is not a BF16 value (7 mantissa bits): it rounds to 1, so a BF16 product of it with
  // itself is exactly 1, while FP32 would give 1.001953...
  const float v = 1.0f + std::ldexp(1.0f, -10);
  for (Bf16Kernel kernel : runnable_kernels()) {
    auto lin = make_linear_bf16_on(kernel, &v, nullptr, 1, 1, "t");
    float y = 0.0f;
    lin->forward(&v, 1, &y);
    EXPECT_EQ(y, 1.0f) << lin->kernel_path();
  }
}

TEST(LinearBf16, AutomaticChoiceIsNamedAndNeverFp32) {
  auto w = random_vector(32 * 16, 1);
  auto lin = make_linear_bf16(w.data(), nullptr, 32, 16, "t");
  const std::string path = lin->kernel_path();
  if (onednn_has_native_bf16_matmul()) {
    EXPECT_TRUE(path.ends_with(":bf16bf16f32") || path.find(",m>4:f32_panel+onednn:") != std::string::npos) << path;
  } else if (cpu_has_avx2_fma()) {
    EXPECT_EQ(path, "qjoule:avx2:bf16w_bf16a_f32acc");
  } else {
    EXPECT_EQ(path, "qjoule:scalar:bf16w_bf16a_f32acc");
  }
}

TEST(LinearBf16, UnavailableKernelAndNonFiniteWeightsFailClearly) {
  std::vector<float> w(4 * 3, 1.0f);
  if (!onednn_has_native_bf16_matmul()) {
    EXPECT_THROW(make_linear_bf16_on(Bf16Kernel::onednn, w.data(), nullptr, 4, 3, "t"), qjoule::Error);
  }
  w[5] = std::numeric_limits<float>::infinity();
  try {
    make_linear_bf16(w.data(), nullptr, 4, 3, "layer.2.attention.out_lin.weight");
    FAIL() << "Inf weight accepted";
  } catch (const qjoule::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer.2.attention.out_lin.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("[1, 2]"), std::string::npos) << what;
  }
}

}  // namespace

// qjoule's FP32 and BF16 GEMVs (m <= 4, gemv_dense_avx512.h) against their scalar twins, directly and
// through the fp32 / bf16 layers at m = 1..5 (m = 5 runs oneDNN).
// Budget: FP32 accumulation in 16 lanes of ~k/16 terms each (two per vdpbf16ps step for BF16) and a
// tree reduction, against double accumulation of the same products (BF16 products are exact in FP32):
//   |y − ref| ≤ (k/16 + 8)·2⁻²³·Σ_t |x_t·w_t| + 2⁻²³·|bias|.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/gemv_dense_avx512.h"
#include "kernels/cpu/linear_bf16_kernels.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_onednn_lowp.h"

namespace {

namespace k = qjoule::kernels;

struct Case {
  int64_t m, n, kk;
};

std::vector<float> normal(size_t count, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(count);
  for (auto& e : v) e = d(rng);
  return v;
}

// Σ_t |x_t·w_t| per output (values as the kernel sees them).
std::vector<double> magnitudes(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                               int64_t kk) {
  std::vector<double> mag(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t t = 0; t < kk; ++t) s += std::fabs(double(x[i * kk + t]) * w[j * kk + t]);
      mag[i * n + j] = s;
    }
  return mag;
}

void expect_within_budget(const std::vector<float>& y, const std::vector<float>& ref, const std::vector<double>& mag,
                          const std::vector<float>& bias, const Case& c, const char* what) {
  const double u = std::ldexp(1.0, -23);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      const size_t at = static_cast<size_t>(i * c.n + j);
      const double budget = (double(c.kk) / 16 + 8) * u * mag[at] + u * std::fabs(bias[static_cast<size_t>(j)]);
      ASSERT_NEAR(y[at], ref[at], budget)
          << what << " m=" << c.m << " n=" << c.n << " k=" << c.kk << " at " << i << "," << j;
    }
}

const Case kCases[] = {{1, 1, 1},   {1, 5, 15},  {2, 4, 16},   {3, 7, 17},     {4, 33, 31},  {1, 37, 32},
                       {2, 67, 33}, {3, 9, 100}, {4, 70, 768}, {1, 131, 2048}, {2, 5, 5632}, {4, 130, 333}};

TEST(GemvDense, F32MatchesTheReferenceWithinBudget) {
  if (!k::cpu_supports_gemv_f32_avx512()) GTEST_SKIP() << "this CPU has no AVX-512 (F, BW, VL)";
  std::mt19937 rng(31);
  for (const Case& c : kCases) {
    const auto x = normal(static_cast<size_t>(c.m * c.kk), rng);
    const auto w = normal(static_cast<size_t>(c.n * c.kk), rng, 0.05f);
    const auto bias = normal(static_cast<size_t>(c.n), rng);
    std::vector<float> y(static_cast<size_t>(c.m * c.n)), ref(y.size()), y0(y.size()), ref0(y.size());
    k::gemv_f32_avx512(x.data(), c.m, w.data(), bias.data(), c.n, c.kk, y.data());
    k::linear_f32_ref(x.data(), c.m, w.data(), bias.data(), c.n, c.kk, ref.data());
    expect_within_budget(y, ref, magnitudes(x, w, c.m, c.n, c.kk), bias, c, "f32");
    k::gemv_f32_avx512(x.data(), c.m, w.data(), nullptr, c.n, c.kk, y0.data());
    k::linear_f32_ref(x.data(), c.m, w.data(), nullptr, c.n, c.kk, ref0.data());
    expect_within_budget(y0, ref0, magnitudes(x, w, c.m, c.n, c.kk), std::vector<float>(c.n, 0.0f), c, "f32 no bias");
  }
}

TEST(GemvDense, Bf16MatchesTheReferenceWithinBudget) {
  if (!k::cpu_supports_gemv_bf16_avx512()) GTEST_SKIP() << "this CPU has no AVX512_BF16";
  std::mt19937 rng(32);
  for (const Case& c : kCases) {
    const auto x = normal(static_cast<size_t>(c.m * c.kk), rng);
    const auto w = normal(static_cast<size_t>(c.n * c.kk), rng, 0.05f);
    const auto bias = normal(static_cast<size_t>(c.n), rng);
    std::vector<uint16_t> xb(x.size()), wb(w.size());
    std::vector<float> xr(x.size()), wr(w.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = k::f32_to_bf16_bits(x[i]), xr[i] = k::bf16_bits_to_f32(xb[i]);
    for (size_t i = 0; i < w.size(); ++i) wb[i] = k::f32_to_bf16_bits(w[i]), wr[i] = k::bf16_bits_to_f32(wb[i]);
    std::vector<float> y(static_cast<size_t>(c.m * c.n)), ref(y.size());
    k::gemv_bf16_avx512(xb.data(), c.m, wb.data(), bias.data(), c.n, c.kk, y.data());
    k::linear_bf16_ref(x.data(), c.m, w.data(), bias.data(), c.n, c.kk, ref.data());
    expect_within_budget(y, ref, magnitudes(xr, wr, c.m, c.n, c.kk), bias, c, "bf16");
  }
}

// The layers route m <= 4 to the GEMV and say so; m = 5 runs oneDNN; every m within budget.
TEST(GemvDense, LayersUseTheGemvForDecodeAndOneDnnAbove) {
  std::mt19937 rng(33);
  const int64_t n = 45, kk = 300;
  const auto w = normal(static_cast<size_t>(n * kk), rng, 0.05f);
  const auto bias = normal(static_cast<size_t>(n), rng);
  const auto f32 = k::make_linear_f32_onednn(w.data(), bias.data(), n, kk);
  const auto bf16 = k::make_linear_bf16(w.data(), bias.data(), n, kk, "layer");
  if (k::cpu_supports_gemv_f32_avx512()) {
    EXPECT_EQ(f32->kernel_path().rfind("qjoule:avx512:f32_gemv,m>4:onednn:", 0), 0u) << f32->kernel_path();
  } else {
    EXPECT_EQ(f32->kernel_path().rfind("onednn:", 0), 0u) << f32->kernel_path();
  }
  if (k::cpu_supports_gemv_bf16_avx512() && k::onednn_has_native_bf16_matmul()) {
    const std::string& path = bf16->kernel_path();
    EXPECT_TRUE(path.starts_with("qjoule:avx512_bf16:bf16_gemv,m>4:onednn:") ||
                path.starts_with("qjoule:avx512_bf16:bf16_gemv,m>4:f32_panel+onednn:"))
        << path;
  }
  std::vector<float> wr(w.size());
  for (size_t i = 0; i < w.size(); ++i) wr[i] = k::round_to_bf16(w[i]);
  for (int64_t m = 1; m <= 5; ++m) {
    const Case c{m, n, kk};
    const auto x = normal(static_cast<size_t>(m * kk), rng);
    std::vector<float> xr(x.size());
    for (size_t i = 0; i < x.size(); ++i) xr[i] = k::round_to_bf16(x[i]);
    std::vector<float> y(static_cast<size_t>(m * n)), ref(y.size());
    f32->forward(x.data(), m, y.data());
    k::linear_f32_ref(x.data(), m, w.data(), bias.data(), n, kk, ref.data());
    expect_within_budget(y, ref, magnitudes(x, w, m, n, kk), bias, c, "fp32 layer");
    bf16->forward(x.data(), m, y.data());
    k::linear_bf16_ref(x.data(), m, w.data(), bias.data(), n, kk, ref.data());
    expect_within_budget(y, ref, magnitudes(xr, wr, m, n, kk), bias, c, "bf16 layer");
  }
}

}  // namespace

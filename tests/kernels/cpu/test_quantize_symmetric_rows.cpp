// Symmetric per-row INT8 quantization: the AVX2 activation path must produce exactly the scalar
// codes (budget: 0 — identical IEEE operations), and edge cases behave as documented. The AVX
// dequantization rows match the scalar one within FLT_EPSILON·(|y| + |product| + |bias|): one fused
// multiply-add instead of a rounded multiply and an add.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quantize_symmetric_rows.h"
#include "qjoule/error.h"

namespace {

using qjoule::kernels::quantize_rows_symmetric_s8;
using qjoule::kernels::quantize_rows_symmetric_u8_shifted;
using qjoule::kernels::quantize_rows_symmetric_u8_shifted_scalar;

TEST(QuantizeSymmetricRows, SimdActivationCodesEqualScalarCodes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t cols : {1, 7, 8, 31, 32, 33, 100, 768}) {
    const int64_t rows = 9;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (auto& v : x) v = normal(rng) * 3.0f;
    // Row 1 holds exact ties after scaling (k + 0.5 steps of max/127), row 2 is all zeros,
    // row 3 is denormal-only, row 4 has one outlier.
    for (int64_t k = 0; k < cols; ++k) x[static_cast<size_t>(cols + k)] = float(k % 254 - 127) + 0.5f;
    x[static_cast<size_t>(cols)] = 127.0f;  // max 127 → inv = 1, so every other value is an exact .5 tie
    for (int64_t k = 0; k < cols; ++k) x[static_cast<size_t>(2 * cols + k)] = 0.0f;
    for (int64_t k = 0; k < cols; ++k) x[static_cast<size_t>(3 * cols + k)] = 1e-40f * float(k % 3);
    x[static_cast<size_t>(4 * cols)] = 1000.0f;
    std::vector<uint8_t> simd(x.size()), scalar(x.size());
    std::vector<float> s_simd(rows), s_scalar(rows);
    quantize_rows_symmetric_u8_shifted(x.data(), rows, cols, simd.data(), s_simd.data(), "x");
    quantize_rows_symmetric_u8_shifted_scalar(x.data(), rows, cols, scalar.data(), s_scalar.data(), "x");
    ASSERT_EQ(simd, scalar) << "cols=" << cols;
    ASSERT_EQ(s_simd, s_scalar) << "cols=" << cols;
    for (int64_t k = 0; k < cols; ++k) {
      EXPECT_EQ(simd[static_cast<size_t>(2 * cols + k)], 128) << "zero row codes to the zero point";
      EXPECT_EQ(simd[static_cast<size_t>(3 * cols + k)], 128) << "denormal-only row treated as zero";
    }
    EXPECT_EQ(s_simd[2], 0.0f);
    EXPECT_EQ(s_simd[3], 0.0f);
    EXPECT_EQ(simd[static_cast<size_t>(4 * cols)], 255) << "the outlier maps to +127";
    for (uint8_t c : simd) EXPECT_GE(c, 1) << "codes stay in [1, 255]";
  }
}

TEST(QuantizeSymmetricRows, SimdDequantizationMatchesScalarWithinOneRounding) {
  using namespace qjoule::kernels;
  std::vector<std::pair<const char*, DequantizeRowS32>> paths;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    paths.emplace_back("avx2", dequantize_row_s32_avx2);
  if (__builtin_cpu_supports("avx512f")) paths.emplace_back("avx512", dequantize_row_s32_avx512);
  if (paths.empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU";
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> acc_dist(-4000000, 4000000), comp_dist(-300000, 300000);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 768, 2304}) {
    std::vector<int32_t> acc(static_cast<size_t>(n) + 1), comp(static_cast<size_t>(n));
    std::vector<float> sw(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (auto& v : acc) v = acc_dist(rng);
    for (auto& v : comp) v = comp_dist(rng);
    for (auto& v : sw) v = std::fabs(normal(rng)) * 1e-3f;
    for (auto& v : b) v = normal(rng);
    const float sa = 0.02f;
    std::vector<float> scalar(acc.size());
    std::memcpy(scalar.data(), acc.data(), acc.size() * sizeof(float));
    dequantize_row_s32_scalar(scalar.data(), n, sa, comp.data(), sw.data(), b.data());
    for (const auto& [name, fn] : paths) {
      std::vector<float> simd(acc.size());
      std::memcpy(simd.data(), acc.data(), acc.size() * sizeof(float));
      fn(simd.data(), n, sa, comp.data(), sw.data(), b.data());
      for (int64_t j = 0; j < n; ++j) {
        const float ulp = std::numeric_limits<float>::epsilon();
        const float product = float(acc[size_t(j)] - comp[size_t(j)]) * (sa * sw[size_t(j)]);
        ASSERT_NEAR(simd[size_t(j)], scalar[size_t(j)],
                    ulp * (std::fabs(scalar[size_t(j)]) + std::fabs(product) + std::fabs(b[size_t(j)])))
            << name << " n=" << n << " j=" << j;
      }
      int32_t after;
      std::memcpy(&after, &simd[size_t(n)], sizeof after);
      ASSERT_EQ(after, acc[size_t(n)]) << name << ": wrote past the row (n=" << n << ")";
    }
  }
}

TEST(QuantizeSymmetricRows, WeightCodesRoundTripWithinHalfAStep) {
  const int64_t rows = 5, cols = 37;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& v : w) v = uni(rng);
  w[3] = -5.0f;  // ±max of row 0 maps to −qmax exactly
  for (int qmax : {127, 63}) {
    std::vector<int8_t> q(w.size());
    std::vector<float> scales(rows);
    quantize_rows_symmetric_s8(w.data(), rows, cols, qmax, q.data(), scales.data(), "w");
    EXPECT_EQ(q[3], -qmax);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t k = 0; k < cols; ++k) {
        const size_t i = static_cast<size_t>(r * cols + k);
        ASSERT_LE(std::abs(int{q[i]}), qmax);
        ASSERT_LE(std::fabs(q[i] * scales[static_cast<size_t>(r)] - w[i]),
                  0.5f * scales[static_cast<size_t>(r)] * 1.0001f);
      }
    }
  }
}

TEST(QuantizeSymmetricRows, RejectsNonFiniteValuesNamingTheTensor) {
  // Columns 17, 35 and 41 of 43: in the 32-wide vector loop, the 8-wide one and the scalar tail.
  for (const int64_t column : {17, 35, 41})
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      std::vector<float> x(2 * 43, 1.0f);
      x[static_cast<size_t>(43 + column)] = bad;
      std::vector<uint8_t> q(x.size());
      std::vector<int8_t> q8(x.size());
      std::vector<float> s(2);
      for (int path = 0; path < 3; ++path) {
        try {
          if (path == 0) quantize_rows_symmetric_u8_shifted(x.data(), 2, 43, q.data(), s.data(), "layer.0.q_lin input");
          if (path == 1)
            quantize_rows_symmetric_u8_shifted_scalar(x.data(), 2, 43, q.data(), s.data(), "layer.0.q_lin input");
          if (path == 2) quantize_rows_symmetric_s8(x.data(), 2, 43, 127, q8.data(), s.data(), "layer.0.q_lin input");
          FAIL() << "no error for " << bad << " on path " << path;
        } catch (const qjoule::Error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("layer.0.q_lin input"), std::string::npos) << what;
          EXPECT_NE(what.find("row 1 column " + std::to_string(column)), std::string::npos) << what;
        }
      }
    }
}

}  // namespace

// oneDNN's u8×s8→s32 matmul against a plain integer reference. Budget: 0 (integers must be exact)
// for weights within int8_gemm_weight_qmax(), including the worst-case operands.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/gemm_u8s8s32.h"

namespace {

using qjoule::kernels::GemmU8S8S32;
using qjoule::kernels::int8_gemm_weight_qmax;

std::vector<int32_t> reference(const std::vector<uint8_t>& a, const std::vector<int8_t>& b, int64_t m, int64_t n,
                               int64_t k) {
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += int64_t{a[static_cast<size_t>(i * k + t)]} * b[static_cast<size_t>(j * k + t)];
      c[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(acc);
    }
  return c;
}

TEST(GemmU8S8S32, ExactWithinTheMeasuredWeightRange) {
  const int qmax = int8_gemm_weight_qmax();
  ASSERT_TRUE(qmax == 127 || qmax == 63) << qmax;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> ua(1, 255), ub(-qmax, qmax), coin(0, 3);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 17, 33}, {3, 64, 768}, {64, 96, 256}, {130, 40, 3072}}) {
    std::vector<uint8_t> a(static_cast<size_t>(m * k));
    std::vector<int8_t> b(static_cast<size_t>(n * k));
    // A quarter of the operands sit at the extremes, where vpmaddubsw pairs would saturate.
    for (auto& v : a) v = static_cast<uint8_t>(coin(rng) == 0 ? 255 : ua(rng));
    for (auto& v : b) v = static_cast<int8_t>(coin(rng) == 0 ? (coin(rng) < 2 ? qmax : -qmax) : ub(rng));
    GemmU8S8S32 gemm(b.data(), n, k);
    std::vector<int32_t> c(static_cast<size_t>(m * n));
    gemm.run(a.data(), m, c.data());
    ASSERT_EQ(c, reference(a, b, m, n, k)) << "m=" << m << " n=" << n << " k=" << k;
    const std::string path = gemm.kernel_path(m);
    if (m <= qjoule::kernels::kGemvU8S8S32MaxRows && qjoule::kernels::cpu_supports_avx512_vnni()) {
      EXPECT_EQ(path, "qjoule:avx512_vnni:u8s8s32_gemv");
    } else {
      EXPECT_EQ(path.rfind("onednn:", 0), 0u) << path;
    }
  }
}

// qjoule's VNNI GEMV (m <= 4) against the integer reference and oneDNN at the same m: bit-exact, at
// k with and without a 64-byte tail, n not a multiple of the 4-row or 32-row blocks, and worst-case
// operands (a = 255, |b| = 127) that would saturate a vpmaddubsw pair.
TEST(GemmU8S8S32, VnniGemvIsExactAndEqualsOneDnn) {
  if (!qjoule::kernels::cpu_supports_avx512_vnni()) GTEST_SKIP() << "this CPU has no AVX512_VNNI";
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> ua(0, 255), ub(-127, 127), coin(0, 3);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {5, 64}, {37, 100}, {70, 768}, {131, 2048}, {9, 5632}}) {
    std::vector<int8_t> b(static_cast<size_t>(n * k));
    for (auto& v : b) v = static_cast<int8_t>(coin(rng) == 0 ? (coin(rng) < 2 ? 127 : -127) : ub(rng));
    const GemmU8S8S32 gemv(b.data(), n, k), onednn(b.data(), n, k, /*allow_gemv=*/false);
    EXPECT_EQ(gemv.kernel_path(), "qjoule:avx512_vnni:u8s8s32_gemv,m>4:" + onednn.kernel_path(5));
    for (int64_t m = 1; m <= qjoule::kernels::kGemvU8S8S32MaxRows; ++m) {
      std::vector<uint8_t> a(static_cast<size_t>(m * k));
      for (auto& v : a) v = static_cast<uint8_t>(coin(rng) == 0 ? 255 : ua(rng));
      std::vector<int32_t> c(static_cast<size_t>(m * n), -1), c_onednn(c.size(), -2);
      ASSERT_TRUE(gemv.uses_gemv(m));
      gemv.run(a.data(), m, c.data());
      onednn.run(a.data(), m, c_onednn.data());
      const auto ref = reference(a, b, m, n, k);
      ASSERT_EQ(c, ref) << "gemv m=" << m << " n=" << n << " k=" << k;
      if (int8_gemm_weight_qmax() == 127) {
        ASSERT_EQ(c_onednn, ref) << "oneDNN m=" << m << " n=" << n << " k=" << k;
      }
    }
  }
}

TEST(GemmU8S8S32, SevenBitWeightsOnlyWhereFullRangeSaturates) {
  // The probe's verdict is reproducible: if it chose 63, full-range weights really are inexact here.
  if (int8_gemm_weight_qmax() == 127) GTEST_SKIP() << "this CPU's int8 GEMM does not saturate (VNNI)";
  const int64_t m = 4, n = 8, k = 64;
  std::vector<uint8_t> a(static_cast<size_t>(m * k), 255);
  std::vector<int8_t> b(static_cast<size_t>(n * k), 127);
  GemmU8S8S32 gemm(b.data(), n, k);
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  gemm.run(a.data(), m, c.data());
  EXPECT_NE(c, reference(a, b, m, n, k)) << "expected vpmaddubsw saturation with |w| = 127";
}

}  // namespace

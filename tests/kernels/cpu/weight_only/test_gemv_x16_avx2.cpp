// The AVX2 x16 decode GEMVs (avx2/gemv_x16_avx2.h) at the edges of their integer arithmetic: the largest codes
// (int4 asym u − z = ±15, w8 ±127, NF4's ±1.0, E2M1's ±6) times the largest activations (every q = ±32767) over
// rows of 8-block octets and a tail of single blocks stay exact: the result within 2^-20 of the format's FP32 twin
// (the scalar kernel on the same codes; what is left is FP32 rounding), and a zero activation block (s = 0) adds
// nothing.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_int8.h"
#include "qjoule/quant/quantize_nf4.h"

namespace {

namespace k = qjoule::kernels;
namespace q = qjoule::quant;

constexpr int64_t kOut = 3, kIn = 32 * 20;  // two octets of 32-blocks and four blocks more

bool avx2_runs() { return k::cpu_supports_avx2_fma_f16c(); }

// Rows of weights: row 0 all +a, row 1 all −a, row 2 alternating; x all +1 (row 0 of x) or all −1 (row 1), so every
// activation code is ±32767.
std::vector<float> extreme_weights(float a, int64_t in = kIn) {
  std::vector<float> w(size_t(kOut * in));
  for (int64_t k = 0; k < in; ++k) {
    w[size_t(k)] = a;
    w[size_t(in + k)] = -a;
    w[size_t(2 * in + k)] = k % 2 == 0 ? a : -a;
  }
  return w;
}

std::vector<float> extreme_activations(int64_t in) {
  std::vector<float> x(size_t(2 * in), 1.0f);
  for (int64_t k = 0; k < in; ++k) x[size_t(in + k)] = -1.0f;
  return x;
}

// y from the GEMV against the twin's on the same codes, within 2^-20 of row 0's |y| (Σ |x · w| of every row).
template <class Gemv, class Twin, class Packed>
void expect_exact(Gemv gemv, Twin twin, const Packed& packed, const char* what) {
  const auto x = extreme_activations(packed.cols);
  std::vector<float> y(size_t(2 * kOut), -1.0f), want(y.size());
  ASSERT_TRUE(gemv(packed, nullptr, x.data(), 2, y.data())) << what;
  twin(packed, nullptr, x.data(), 2, want.data());
  const double tolerance = 0x1p-20 * std::fabs(want[0]);
  ASSERT_GT(tolerance, 0.0) << what;
  for (size_t at = 0; at < y.size(); ++at) EXPECT_NEAR(y[at], want[at], tolerance) << what << " at " << at;
}

TEST(GemvX16Avx2, TheLargestCodesAndActivationsStayExact) {
  if (!avx2_runs()) GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C";
  const auto w = extreme_weights(1.5f);
  // int4 asym G = 32: a row of one sign has z = 0 or 15 and codes 15 or 0, |u − z| = 15.
  using Asym32 = q::BlockInt4Asym<32>;
  using Sym128 = q::BlockInt4Sym<128>;
  expect_exact(&k::detail::gemv_int4_x16_avx2<Asym32>, &k::detail::gemm_int4_f32_scalar<Asym32>,
               q::quantize_matrix_int4<Asym32>(w.data(), kOut, kIn, "t"), "int4 asym G=32");
  expect_exact(&k::detail::gemv_int4_x16_avx2<Sym128>, &k::detail::gemm_int4_f32_scalar<Sym128>,
               q::quantize_matrix_int4<Sym128>(w.data(), kOut, kIn, "t"), "int4 sym G=128");
  expect_exact(&k::detail::gemv_w8_x16_avx2, &k::detail::gemm_w8_f32_scalar,
               q::quantize_matrix_int8(w.data(), kOut, kIn, "t"), "w8");
  expect_exact(&k::detail::gemv_nf4_x16_avx2, &k::detail::gemm_nf4_f32_scalar,
               q::quantize_matrix_nf4(w.data(), kOut, kIn, "t"), "nf4");
  const auto w6 = extreme_weights(6.0f);  // E2M1's largest value with a scale of 1
  expect_exact(&k::detail::gemv_fp4_x16_avx2<q::Mxfp4Matrix>, &k::detail::gemm_fp4_f32_scalar<q::Mxfp4Matrix>,
               q::quantize_matrix_mxfp4(w6.data(), kOut, kIn, "t"), "mxfp4");
  expect_exact(&k::detail::gemv_fp4_x16_avx2<q::Nvfp4Matrix>, &k::detail::gemm_fp4_f32_scalar<q::Nvfp4Matrix>,
               q::quantize_matrix_nvfp4(w6.data(), kOut, kIn, "t"), "nvfp4");
}

// NVFP4 decodes its 32-blocks two pairs at a time (three hadds), then a last pair and a last block; MXFP4 four
// pairs at a time, then pairs and a block; NF4 one pair (its block of 64) at a time (gemv_x16_avx2.h, kPairs): widths
// that end in each of those (NVFP4's also in its 16-column FP32 tail), at the extremes above.
TEST(GemvX16Avx2, PairsQuadsAndTheBlocksAfterThemStayExact) {
  if (!avx2_runs()) GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C";
  for (const int64_t in : {32 * 7, 32 * 7 + 16, 32 * 2, 32 * 6, 32 * 6 + 16}) {
    const std::string what = "nvfp4 width " + std::to_string(in);
    const auto w6 = extreme_weights(6.0f, in);
    expect_exact(&k::detail::gemv_fp4_x16_avx2<q::Nvfp4Matrix>, &k::detail::gemm_fp4_f32_scalar<q::Nvfp4Matrix>,
                 q::quantize_matrix_nvfp4(w6.data(), kOut, in, "t"), what.c_str());
  }
  for (const int64_t in : {32 * 7, 32 * 9, 32 * 10, 32 * 17}) {  // MXFP4: four pairs at a time, then pairs, a block
    const std::string what = "mxfp4 width " + std::to_string(in);
    const auto w6 = extreme_weights(6.0f, in);
    expect_exact(&k::detail::gemv_fp4_x16_avx2<q::Mxfp4Matrix>, &k::detail::gemm_fp4_f32_scalar<q::Mxfp4Matrix>,
                 q::quantize_matrix_mxfp4(w6.data(), kOut, in, "t"), what.c_str());
  }
  for (const int64_t in : {64, 64 * 3}) {
    const std::string what = "nf4 width " + std::to_string(in);
    const auto w = extreme_weights(1.5f, in);
    expect_exact(&k::detail::gemv_nf4_x16_avx2, &k::detail::gemm_nf4_f32_scalar,
                 q::quantize_matrix_nf4(w.data(), kOut, in, "t"), what.c_str());
  }
}

// A block of zero activations (s = 0), a NaN (the caller's FP32 GEMV takes over: false, y untouched).
TEST(GemvX16Avx2, ZeroBlocksAddNothingAndANanIsRefused) {
  if (!avx2_runs()) GTEST_SKIP() << "this CPU has no AVX2 + FMA + F16C";
  const auto w = extreme_weights(0.5f);
  const auto packed = q::quantize_matrix_int4<q::BlockInt4Sym<32>>(w.data(), kOut, kIn, "t");
  std::vector<float> x(size_t(kIn), 0.0f), y(size_t(kOut), -1.0f);
  for (int64_t k = 32 * 8; k < 32 * 9; ++k) x[size_t(k)] = 1.0f;  // one block of ones in the second octet
  ASSERT_TRUE(k::detail::gemv_int4_x16_avx2(packed, nullptr, x.data(), 1, y.data()));
  std::vector<float> want(static_cast<size_t>(kOut));
  k::detail::gemm_int4_f32_scalar(packed, nullptr, x.data(), 1, want.data());
  EXPECT_NEAR(want[0], 16.0f, 0.01f);  // 32 weights of 7 · d, d the FP16 of 0.5 / 7
  for (int64_t o = 0; o < kOut; ++o) EXPECT_NEAR(y[size_t(o)], want[size_t(o)], 1e-5f) << o;
  x[5] = std::nanf("");
  std::fill(y.begin(), y.end(), -1.0f);
  EXPECT_FALSE(k::detail::gemv_int4_x16_avx2(packed, nullptr, x.data(), 1, y.data()));
  EXPECT_EQ(y, std::vector<float>(size_t(kOut), -1.0f));
}

}  // namespace

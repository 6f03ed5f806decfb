// NF4 weights repacked into 16-row panels (kernels/cpu/weight_only/repacked/nf4_repacked.h), plain and nf4:dq:
// the layout unpacks back bit for bit; its FP32 twin matches the row-wise scalar kernel within 1e-5 · Σ_k |x_k ·
// w_k|; the AVX512_VNNI x16 kernel matches the twin on odd shapes (rows not a multiple of 16 nor of the four
// panels read side by side; widths with a partial last 64-block; nf4:dq's groups of 256 absmax straddling rows
// and panels, rows of more than 256 blocks; 1 to 9 activation rows) within that plus 2^-15 · Σ_b max_b |x| ·
// Σ_{k in b} |w_k| (twice the 16-bit activations' bound) plus 2^-12 · Σ_c absmax_c · Σ_{k in c} |x_k| (twice
// the bound of the table's values rounded to 2^-12); a NaN activation goes through the twin, a NaN absmax (nf4:dq:
// an Inf group scale or mean) keeps the rows; and the layer repacks by default, keeps the rows with
// QJOULE_WEIGHT_ONLY_LAYOUT=rows or QJOULE_WEIGHT_ONLY_DECODE=float, and says which in its kernel path.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_nf4.h"
#include "../weight_only_test_util.h"

namespace {

using namespace qjoule;

// What check_nf4_repacked() needs of either matrix: plain nf4 or nf4:dq.
struct PlainNf4 {
  using Matrix = quant::Nf4Matrix;
  static Matrix quantize(const float* w, int64_t rows, int64_t cols) {
    return quant::quantize_matrix_nf4(w, rows, cols, "t.weight");
  }
  static Matrix unpack(const kernels::detail::RepackedNf4& r) { return kernels::detail::unpack_nf4_repacked(r); }
  static void dequantize_row(const Matrix& w, int64_t o, float* out) {
    quant::dequantize_row_nf4_ref(w.row(o), w.cols, out);
  }
  static float absmax(const Matrix& w, int64_t o, int64_t c) { return w.row(o)[c].absmax; }
  static void gemm_rows(const Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
    kernels::detail::gemm_nf4_f32_scalar(w, bias, x, m, y);
  }
};
struct DoubleQuantNf4 {
  using Matrix = quant::Nf4DqMatrix;
  static Matrix quantize(const float* w, int64_t rows, int64_t cols) {
    return quant::quantize_matrix_nf4_double(w, rows, cols, "t.weight");
  }
  static Matrix unpack(const kernels::detail::RepackedNf4& r) { return kernels::detail::unpack_nf4dq_repacked(r); }
  static void dequantize_row(const Matrix& w, int64_t o, float* out) { quant::dequantize_row_nf4_dq_ref(w, o, out); }
  static float absmax(const Matrix& w, int64_t o, int64_t c) { return w.absmax(o * w.blocks_per_row() + c); }
  static void gemm_rows(const Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
    kernels::detail::gemm_nf4dq_f32_scalar(w, bias, x, m, y);
  }
};

void expect_same_nf4_matrix(const quant::Nf4Matrix& back, const quant::Nf4Matrix& w) {
  ASSERT_EQ(back.blocks.size(), w.blocks.size());
  EXPECT_EQ(std::memcmp(back.blocks.data(), w.blocks.data(), w.blocks.size() * sizeof(w.blocks[0])), 0);
}
void expect_same_nf4_matrix(const quant::Nf4DqMatrix& back, const quant::Nf4DqMatrix& w) {
  ASSERT_EQ(back.blocks.size(), w.blocks.size());
  EXPECT_EQ(std::memcmp(back.blocks.data(), w.blocks.data(), w.blocks.size() * sizeof(w.blocks[0])), 0);
  EXPECT_EQ(back.absmax_scales, w.absmax_scales);
  EXPECT_EQ(back.absmax_mean, w.absmax_mean);
}

template <class Kind>
void check_nf4_repacked(int64_t rows, int64_t cols, unsigned seed) {
  SCOPED_TRACE(testing::Message() << rows << "x" << cols);
  const auto wf = test::normal_vector(static_cast<std::size_t>(rows * cols), seed, 0.05f);
  const typename Kind::Matrix w = Kind::quantize(wf.data(), rows, cols);
  const auto r = kernels::detail::repack_nf4(w);
  EXPECT_EQ(r.panel_stride() % 64, 0);
  EXPECT_EQ(r.bytes(), w.bytes());
  expect_same_nf4_matrix(Kind::unpack(r), w);

  const int64_t K = r.padded_cols();
  std::vector<float> wd(static_cast<std::size_t>(rows * K), 0.0f);  // as the kernels decode them
  for (int64_t o = 0; o < rows; ++o) Kind::dequantize_row(w, o, wd.data() + o * K);
  const auto b = test::normal_vector(static_cast<std::size_t>(rows), seed + 2);
  for (int64_t m : {1, 2, 3, 4, 5, 9}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    auto x = test::normal_vector(static_cast<std::size_t>(m * K), seed + 1);
    for (int64_t i = 0; i < m; ++i) std::fill(x.begin() + i * K + cols, x.begin() + (i + 1) * K, 0.0f);
    const float* bias = m % 2 == 1 ? b.data() : nullptr;
    std::vector<float> rows_ref(static_cast<std::size_t>(m * rows)), ref(rows_ref.size()), y16(ref.size());
    Kind::gemm_rows(w, bias, x.data(), m, rows_ref.data());
    kernels::detail::gemm_nf4_f32_repacked_ref(r, bias, x.data(), m, ref.data());
    if (test::repacked_kernels_run())
      kernels::detail::gemm_nf4_x16_repacked_avx512_vnni(r, bias, x.data(), m, y16.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < rows; ++o) {
        const float* xi = x.data() + i * K;
        const auto [products, blocks] = test::x16_budget_terms(xi, wd.data() + o * K, K);
        double absmax_terms = 0.0;
        for (int64_t c = 0; c < K / 64; ++c) {
          double xsum = 0.0;
          for (int64_t k = 64 * c; k < 64 * c + 64; ++k) xsum += std::fabs(xi[k]);
          absmax_terms += std::fabs(Kind::absmax(w, o, c)) * xsum;
        }
        const std::size_t at = static_cast<std::size_t>(i * rows + o);
        ASSERT_NEAR(ref[at], rows_ref[at], 1e-5 * products + 1e-6) << "row " << i << " out " << o;
        if (test::repacked_kernels_run()) {
          ASSERT_NEAR(y16[at], ref[at], 1e-5 * products + 0x1p-15 * blocks + 0x1p-12 * absmax_terms + 1e-6)
              << "row " << i << " out " << o;
        }
      }
    }
  }
}

TEST(Nf4Repacked, RoundTripsAndMatchesItsTwinsOnOddShapes) {
  for (int64_t rows : {1, 15, 17, 40, 71, 130}) {
    for (int64_t cols : {64, 100, 331}) check_nf4_repacked<PlainNf4>(rows, cols, 31);
  }
}

// nf4:dq: the absmax codes' groups of 256 blocks straddle rows and panels (130 x 331: 780 blocks, 4 groups);
// rows of more than 256 blocks (16,500 columns: 258) take the kernel's gathered group scales.
TEST(Nf4Repacked, DoubleQuantRoundTripsAndMatchesItsTwinsOnOddShapes) {
  for (int64_t rows : {1, 15, 17, 40, 71, 130}) {
    for (int64_t cols : {64, 100, 331, 1100}) check_nf4_repacked<DoubleQuantNf4>(rows, cols, 37);
  }
  for (int64_t rows : {3, 17}) check_nf4_repacked<DoubleQuantNf4>(rows, 16500, 41);
}

// The extreme codes (±1, T16 = ±4096) against activations at their block's largest (±32767) in every element:
// the 16 products a lane sums before its conversion stay below 2^31.
TEST(Nf4Repacked, TheLargestSumsStayExact) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const int64_t rows = 16, cols = 128;
  std::vector<float> wf(static_cast<std::size_t>(rows * cols));
  for (int64_t o = 0; o < rows; ++o)
    for (int64_t k = 0; k < cols; ++k) wf[static_cast<std::size_t>(o * cols + k)] = (o + k) % 2 == 0 ? 1.0f : -1.0f;
  const auto r = kernels::detail::repack_nf4(quant::quantize_matrix_nf4(wf.data(), rows, cols, "t"));
  std::vector<float> x(static_cast<std::size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) x[static_cast<std::size_t>(k)] = k % 2 == 0 ? 3.0f : -3.0f;
  std::vector<float> y(static_cast<std::size_t>(rows)), ref(y.size());
  kernels::detail::gemm_nf4_x16_repacked_avx512_vnni(r, nullptr, x.data(), 1, y.data());
  kernels::detail::gemm_nf4_f32_repacked_ref(r, nullptr, x.data(), 1, ref.data());
  for (int64_t o = 0; o < rows; ++o) {
    EXPECT_EQ(std::fabs(ref[static_cast<std::size_t>(o)]), 3.0f * cols) << o;
    EXPECT_NEAR(y[static_cast<std::size_t>(o)], ref[static_cast<std::size_t>(o)], 1e-4 * 3.0 * cols) << o;
  }
}

// A NaN in an activation row sends the call through the FP32 twin: the NaN reaches that row's outputs only.
TEST(Nf4Repacked, ANanActivationGoesThroughTheTwin) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const auto wf = test::normal_vector(20 * 64, 3, 0.05f);
  const auto r = kernels::detail::repack_nf4(quant::quantize_matrix_nf4(wf.data(), 20, 64, "t"));
  auto x = test::normal_vector(2 * 64, 4);
  x[64 + 5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(2 * 20), ref(y.size());
  kernels::detail::gemm_nf4_x16_repacked_avx512_vnni(r, nullptr, x.data(), 2, y.data());
  kernels::detail::gemm_nf4_f32_repacked_ref(r, nullptr, x.data(), 2, ref.data());
  for (std::size_t k = 0; k < y.size(); ++k) {
    if (k < 20) {
      EXPECT_EQ(y[k], ref[k]) << k;
    } else {
      EXPECT_TRUE(std::isnan(y[k])) << k;
    }
  }
}

// nf4 and nf4:dq on AVX512_VNNI repack by default; QJOULE_WEIGHT_ONLY_LAYOUT=rows, QJOULE_WEIGHT_ONLY_DECODE=float
// and a NaN absmax (nf4:dq: a NaN group scale or mean) keep the rows, and the path says which.
TEST(Nf4Repacked, TheLayerSaysWhetherItsWeightsWereRepacked) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const test::Shape s{1, 33, 331};
  const auto w = test::normal_vector(size_t(s.out * s.in), 8, 0.05f);
  EXPECT_TRUE(test::is_repacked_x16_path(
      kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {}, "t")->kernel_path(), "nf4"));
  EXPECT_TRUE(test::is_repacked_x16_path(
      kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {true}, "t")->kernel_path(), "nf4dq"));
  {
    test::ScopedWeightOnlyDecode decode("float");
    EXPECT_THAT(kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {}, "t")->kernel_path(),
                testing::Not(testing::HasSubstr("x16")));
  }
  {
    test::ScopedWeightOnlyLayout rows("rows");
    test::ScopedWeightOnlyDecode decode("x16");
    EXPECT_THAT(kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {}, "t")->kernel_path(),
                testing::StartsWith("qjoule:avx512_vnni:nf4_x16,m>4:"));
    EXPECT_THAT(kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {true}, "t")->kernel_path(),
                testing::StartsWith("qjoule:avx512_vnni:nf4dq_x16,m>4:"));
  }
  auto packed = quant::quantize_matrix_nf4(w.data(), s.out, s.in, "t");
  packed.blocks[3].absmax = std::numeric_limits<float>::quiet_NaN();
  test::ScopedWeightOnlyDecode decode("x16");
  EXPECT_THAT(kernels::make_linear_nf4_packed(std::move(packed), nullptr, "t")->kernel_path(),
              testing::StartsWith("qjoule:avx512_vnni:nf4_x16,m>4:"));
  for (int which = 0; which < 2; ++which) {
    auto dq = quant::quantize_matrix_nf4_double(w.data(), s.out, s.in, "t");
    (which == 0 ? dq.absmax_scales.back() : dq.absmax_mean) = std::numeric_limits<float>::infinity();
    EXPECT_THAT(kernels::make_linear_nf4_packed(std::move(dq), nullptr, "t")->kernel_path(),
                testing::StartsWith("qjoule:avx512_vnni:nf4dq_x16,m>4:"))
        << which;
  }
}

}  // namespace

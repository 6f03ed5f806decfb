// FP4 weights (mxfp4, nvfp4) repacked into 16-row panels (kernels/cpu/weight_only/repacked/fp4_repacked.h): the
// layout unpacks back bit for bit; its FP32 twin matches the row-wise scalar kernel within 1e-5 · Σ_k |x_k · w_k|;
// the AVX512_VNNI x16 kernel matches the twin on odd shapes (rows not a multiple of 16 nor of the four panels
// read side by side; widths with a partial last block, NVFP4's half 32-block; 1 to 9 activation rows) within that plus 2^-15 · Σ_b max_b |x| · Σ_{k in b}
// |w_k| (twice the 16-bit activations' bound; the codes, 2·E2M1, are exact); a NaN activation goes through the
// twin; and the layer repacks by default, keeps the rows with QJOULE_WEIGHT_ONLY_LAYOUT=rows or
// QJOULE_WEIGHT_ONLY_DECODE=float, and says which in its kernel path.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_fp4.h"
#include "../weight_only_test_util.h"

namespace {

using namespace qjoule;
using kernels::detail::RepackedFp4;

template <class Packed>
Packed quantize(const float* w, int64_t rows, int64_t cols) {
  if constexpr (RepackedFp4<Packed>::kNv) {
    return quant::quantize_matrix_nvfp4(w, rows, cols, "t.weight");
  } else {
    return quant::quantize_matrix_mxfp4(w, rows, cols, "t.weight");
  }
}

// The weights as the kernels decode them, padded to the panels' width with zeros.
template <class Packed>
std::vector<float> decoded(const Packed& w, int64_t K) {
  std::vector<float> out(static_cast<std::size_t>(w.rows * K), 0.0f);
  for (int64_t r = 0; r < w.rows; ++r) {
    if constexpr (RepackedFp4<Packed>::kNv) {
      quant::dequantize_row_nvfp4_ref(w.row(r), w.cols, w.tensor_scale, out.data() + r * K);
    } else {
      quant::dequantize_row_mxfp4_ref(w.row(r), w.cols, out.data() + r * K);
    }
  }
  return out;
}

template <class Packed>
void check(int64_t rows, int64_t cols, unsigned seed) {
  SCOPED_TRACE(testing::Message() << (RepackedFp4<Packed>::kNv ? "nvfp4 " : "mxfp4 ") << rows << "x" << cols);
  const auto wf = test::normal_vector(static_cast<std::size_t>(rows * cols), seed, 0.05f);
  const Packed w = quantize<Packed>(wf.data(), rows, cols);
  const auto r = kernels::detail::repack_fp4(w);
  EXPECT_EQ(r.panel_stride() % 64, 0);
  EXPECT_EQ(r.bytes(), w.bytes());
  const Packed back = kernels::detail::unpack_fp4_repacked(r);
  ASSERT_EQ(back.blocks.size(), w.blocks.size());
  EXPECT_EQ(std::memcmp(back.blocks.data(), w.blocks.data(), w.blocks.size() * sizeof(w.blocks[0])), 0);
  if constexpr (RepackedFp4<Packed>::kNv) {
    EXPECT_EQ(back.tensor_scale, w.tensor_scale);
  }

  const int64_t K = r.padded_cols(), Kw = w.padded_cols();
  const auto wd = decoded(w, K);
  const auto b = test::normal_vector(static_cast<std::size_t>(rows), seed + 2);
  for (int64_t m : {1, 2, 3, 4, 5, 9}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    auto x = test::normal_vector(static_cast<std::size_t>(m * K), seed + 1);
    std::vector<float> xw(static_cast<std::size_t>(m * Kw), 0.0f);  // the rows' width, for the row-wise kernel
    for (int64_t i = 0; i < m; ++i) {
      std::fill(x.begin() + i * K + cols, x.begin() + (i + 1) * K, 0.0f);
      std::copy(x.begin() + i * K, x.begin() + i * K + cols, xw.begin() + i * Kw);
    }
    const float* bias = m % 2 == 1 ? b.data() : nullptr;
    std::vector<float> rows_ref(static_cast<std::size_t>(m * rows)), ref(rows_ref.size());
    kernels::detail::gemm_fp4_f32_scalar(w, bias, xw.data(), m, rows_ref.data());
    kernels::detail::gemm_fp4_f32_repacked_ref(r, bias, x.data(), m, ref.data());
    std::vector<float> y16(ref.size());
    if (test::repacked_kernels_run())
      kernels::detail::gemm_fp4_x16_repacked_avx512_vnni(r, bias, x.data(), m, y16.data());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < rows; ++o) {
        const auto [products, blocks] = test::x16_budget_terms(x.data() + i * K, wd.data() + o * K, K);
        const std::size_t at = static_cast<std::size_t>(i * rows + o);
        ASSERT_NEAR(ref[at], rows_ref[at], 1e-5 * products + 1e-6) << "row " << i << " out " << o;
        if (test::repacked_kernels_run()) {
          ASSERT_NEAR(y16[at], ref[at], 1e-5 * products + 0x1p-15 * blocks + 1e-6) << "row " << i << " out " << o;
        }
      }
    }
  }
}

TEST(Fp4Repacked, RoundTripsAndMatchesItsTwinsOnOddShapes) {
  for (int64_t rows : {1, 15, 17, 40, 71, 130}) {
    for (int64_t cols : {64, 80, 331}) {  // 80: NVFP4's last 32-block half filled
      check<quant::Mxfp4Matrix>(rows, cols, 21);
      check<quant::Nvfp4Matrix>(rows, cols, 22);
    }
  }
}

// A NaN in an activation row sends the call through the FP32 twin: the NaN reaches that row's outputs only.
TEST(Fp4Repacked, ANanActivationGoesThroughTheTwin) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const auto wf = test::normal_vector(20 * 64, 3, 0.05f);
  const auto r = kernels::detail::repack_fp4(quant::quantize_matrix_nvfp4(wf.data(), 20, 64, "t"));
  auto x = test::normal_vector(2 * 64, 4);
  x[64 + 5] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(2 * 20), ref(y.size());
  kernels::detail::gemm_fp4_x16_repacked_avx512_vnni(r, nullptr, x.data(), 2, y.data());
  kernels::detail::gemm_fp4_f32_repacked_ref(r, nullptr, x.data(), 2, ref.data());
  for (std::size_t k = 0; k < y.size(); ++k) {
    if (k < 20) {
      EXPECT_EQ(y[k], ref[k]) << k;
    } else {
      EXPECT_TRUE(std::isnan(y[k])) << k;
    }
  }
}

// mxfp4 and nvfp4 on AVX512_VNNI repack by default; QJOULE_WEIGHT_ONLY_LAYOUT=rows and
// QJOULE_WEIGHT_ONLY_DECODE=float keep the rows, and the path says which. The rows' x16 GEMV still matches
// the reference (the layer tests run the repacked kernel).
TEST(Fp4Repacked, TheLayerSaysWhetherItsWeightsWereRepacked) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const test::Shape s{1, 33, 331};
  const auto x = test::normal_vector(size_t(s.m * s.in), 7);
  const auto w = test::normal_vector(size_t(s.out * s.in), 8, 0.05f);
  using Make = std::unique_ptr<kernels::Linear> (*)(const float*, const float*, int64_t, int64_t, const std::string&);
  using Ref = void (*)(const float*, int64_t, const float*, const float*, int64_t, int64_t, const std::string&, float*);
  const std::tuple<const char*, Make, Ref> kinds[] = {
      {"mxfp4", &kernels::make_linear_mxfp4, &kernels::linear_mxfp4_ref},
      {"nvfp4", &kernels::make_linear_nvfp4, &kernels::linear_nvfp4_ref}};
  for (const auto& [name, make, ref_of] : kinds) {
    const std::string format(name);
    EXPECT_TRUE(test::is_repacked_x16_path(make(w.data(), nullptr, s.out, s.in, "t")->kernel_path(), format));
    {
      test::ScopedWeightOnlyDecode decode("float");
      EXPECT_THAT(make(w.data(), nullptr, s.out, s.in, "t")->kernel_path(), testing::Not(testing::HasSubstr("x16")));
    }
    test::ScopedWeightOnlyLayout rows("rows");
    test::ScopedWeightOnlyDecode decode("x16");
    auto lin = make(w.data(), nullptr, s.out, s.in, "t");
    EXPECT_THAT(lin->kernel_path(), testing::StartsWith("qjoule:avx512_vnni:" + format + "_x16,m>4:"));
    std::vector<float> ref(size_t(s.m * s.out)), y(ref.size());
    ref_of(x.data(), s.m, w.data(), nullptr, s.out, s.in, "t", ref.data());
    lin->forward(x.data(), s.m, y.data());
    test::expect_within_budget(y, ref, test::budget_scale(x, w, nullptr, s), s, lin->kernel_path());
  }
}

}  // namespace

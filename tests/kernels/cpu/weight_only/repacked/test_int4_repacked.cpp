// int4 weights repacked into 16-row panels (kernels/cpu/weight_only/repacked/int4_repacked.h): the layout
// unpacks back bit for bit; its int8-activation twin equals the row-wise scalar kernel bit for bit (the
// same integer sums, the same FP32 order), its FP32 twin the row-wise FP32 one within 1e-5 · Σ_k |x_k · w_k|;
// the AVX512_VNNI kernels match the twins on odd shapes (rows not a multiple of 16, or of the four panels
// read side by side; partial groups; 1 to 9 activation rows): int4_s8 within 1e-5 · Σ_k |x_k · w_k| (w
// dequantized: only the FP32 order of the per-block terms and one FMA differ), int4_x16 within that plus
// 2^-15 · Σ_b max_b |x| · Σ_{k in b} |w_k| (twice the 16-bit activations' bound);
// and the layer repacks by default, keeps the rows with QJOULE_WEIGHT_ONLY_LAYOUT=rows or a NaN / Inf
// scale, and says which in its kernel path.
#include <gmock/gmock.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "error_of.h"
#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_int4.h"
#include "../weight_only_test_util.h"

namespace {

using namespace qjoule;
using kernels::detail::RepackedInt4;

template <class Block>
std::vector<float> dequantized(const quant::BlockMatrix<Block>& w) {
  std::vector<float> out(static_cast<std::size_t>(w.rows * w.padded_cols()));
  for (int64_t r = 0; r < w.rows; ++r) {
    if constexpr (RepackedInt4<Block>::kAsym) {
      quant::dequantize_row_int4_asym_ref<Block::kSize>(w.row(r), w.padded_cols(), out.data() + r * w.padded_cols());
    } else {
      quant::dequantize_row_int4_sym_ref<Block::kSize>(w.row(r), w.padded_cols(), out.data() + r * w.padded_cols());
    }
  }
  return out;
}

template <class Block>
void check_block(int64_t rows, int64_t cols, unsigned seed) {
  SCOPED_TRACE(testing::Message() << "G=" << Block::kSize << (RepackedInt4<Block>::kAsym ? " asym " : " sym ") << rows
                                  << "x" << cols);
  const auto wf = test::normal_vector(static_cast<std::size_t>(rows * cols), seed, 0.05f);
  const auto w = quant::quantize_matrix_int4<Block>(wf.data(), rows, cols, "t.weight");
  const auto r = kernels::detail::repack_int4(w);
  // The layout: whole 64-byte panels, the format's bytes, and back bit for bit.
  EXPECT_EQ(r.panel_stride() % 64, 0);
  EXPECT_EQ(r.bytes(), w.bytes());
  const auto back = kernels::detail::unpack_int4_repacked(r);
  ASSERT_EQ(back.blocks.size(), w.blocks.size());
  EXPECT_EQ(std::memcmp(back.blocks.data(), w.blocks.data(), w.bytes()), 0);

  const int64_t K = w.padded_cols();
  const auto wd = dequantized(w);
  const auto b = test::normal_vector(static_cast<std::size_t>(rows), seed + 2);
  for (int64_t m : {1, 2, 3, 4, 5, 9}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    auto x = test::normal_vector(static_cast<std::size_t>(m * K), seed + 1);
    for (int64_t i = 0; i < m; ++i) std::fill(x.begin() + i * K + cols, x.begin() + (i + 1) * K, 0.0f);
    const float* bias = m % 2 == 1 ? b.data() : nullptr;
    std::vector<float> rows_ref(static_cast<std::size_t>(m * rows)), ref(rows_ref.size()), y(rows_ref.size());
    kernels::detail::gemm_int4_s8_scalar(w, bias, x.data(), m, rows_ref.data(), "t");
    kernels::detail::gemm_int4_s8_repacked_ref(r, bias, x.data(), m, ref.data(), "t");
    for (std::size_t k = 0; k < ref.size(); ++k) ASSERT_EQ(ref[k], rows_ref[k]) << k;
    // The FP32 twins, on the rows and on the panels.
    std::vector<float> f32_rows(rows_ref.size()), f32_ref(rows_ref.size()), y16(rows_ref.size());
    kernels::detail::gemm_int4_f32_scalar(w, bias, x.data(), m, f32_rows.data());
    kernels::detail::gemm_int4_f32_repacked_ref(r, bias, x.data(), m, f32_ref.data());
    if (test::repacked_kernels_run()) {
      kernels::detail::gemm_int4_s8_repacked_avx512_vnni(r, bias, x.data(), m, y.data(), "t");
      kernels::detail::gemm_int4_x16_repacked_avx512_vnni(r, bias, x.data(), m, y16.data());
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < rows; ++o) {
        const auto [products, blocks] = test::x16_budget_terms(x.data() + i * K, wd.data() + o * K, K);
        const std::size_t at = static_cast<std::size_t>(i * rows + o);
        ASSERT_NEAR(f32_ref[at], f32_rows[at], 1e-5 * products + 1e-6) << "row " << i << " out " << o;
        if (!test::repacked_kernels_run()) continue;
        ASSERT_NEAR(y[at], ref[at], 1e-5 * products + 1e-6) << "s8, row " << i << " out " << o;
        ASSERT_NEAR(y16[at], f32_ref[at], 1e-5 * products + 0x1p-15 * blocks + 1e-6)
            << "x16, row " << i << " out " << o;
      }
    }
  }
}

TEST(Int4Repacked, RoundTripsAndMatchesItsTwinsOnOddShapes) {
  for (int64_t rows : {1, 15, 17, 40, 71, 130}) {
    for (int64_t cols : {128, 331}) {
      check_block<quant::BlockInt4Sym<32>>(rows, cols, 11);
      check_block<quant::BlockInt4Sym<64>>(rows, cols, 12);
      check_block<quant::BlockInt4Sym<128>>(rows, cols, 13);
      check_block<quant::BlockInt4Asym<32>>(rows, cols, 14);
      check_block<quant::BlockInt4Asym<64>>(rows, cols, 15);
      check_block<quant::BlockInt4Asym<128>>(rows, cols, 16);
    }
  }
  check_block<quant::BlockInt4Sym<32>>(16, 96, 17);  // a 32-column tail of G = 32
}

// int4:a8 and int4 on AVX512_VNNI repack by default; QJOULE_WEIGHT_ONLY_LAYOUT=rows and a matrix with a NaN
// or Inf scale keep the rows (the path says which), as does QJOULE_WEIGHT_ONLY_DECODE=float for int4; a value
// the variable does not take is one line.
TEST(Int4Repacked, TheLayerSaysWhetherItsWeightsWereRepacked) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  const auto wf = test::normal_vector(40 * 256, 5, 0.05f);
  const auto path = [&](uint16_t first_scale) {
    auto w = quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(wf.data(), 40, 256, "t.weight");
    if (first_scale != 0) w.blocks[3].d = first_scale;
    return kernels::make_linear_int4_packed(std::move(w), nullptr, "t.weight", true)->kernel_path();
  };
  EXPECT_EQ(path(0), "qjoule:avx512_vnni:int4_s8_repacked");
  EXPECT_EQ(path(0x7E00), "qjoule:avx512_vnni:int4_s8");  // NaN
  EXPECT_EQ(path(0x7C00), "qjoule:avx512_vnni:int4_s8");  // +Inf
  {
    test::ScopedWeightOnlyLayout rows("rows");
    EXPECT_EQ(path(0), "qjoule:avx512_vnni:int4_s8");
  }
  // int4 with FP32 activations: the x16 kernel on the panels at every m, unless the rows are asked for.
  const auto f32_path = [&](uint16_t first_scale) {
    auto w = quant::quantize_matrix_int4<quant::BlockInt4Asym<128>>(wf.data(), 40, 256, "t.weight");
    if (first_scale != 0) w.blocks[1].d = first_scale;
    return kernels::make_linear_int4_packed(std::move(w), nullptr, "t.weight", false)->kernel_path();
  };
  EXPECT_TRUE(test::is_repacked_x16_path(f32_path(0), "int4")) << f32_path(0);
  EXPECT_THAT(f32_path(0x7E00), testing::Not(testing::HasSubstr("repacked")));
  {
    test::ScopedWeightOnlyLayout rows("rows");
    EXPECT_THAT(f32_path(0), testing::Not(testing::HasSubstr("repacked")));
  }
  {
    test::ScopedWeightOnlyDecode decode("float");
    EXPECT_THAT(f32_path(0), testing::Not(testing::HasSubstr("x16")));
  }
  {
    test::ScopedWeightOnlyLayout bad("tiles");
    EXPECT_EQ(test::error_of([&] { (void)path(0); }), "QJOULE_WEIGHT_ONLY_LAYOUT=tiles: expected repacked or rows");
  }
}

// The rows path, kept by the override, still matches the twin (the layer tests run the repacked one).
TEST(Int4Repacked, TheRowsLayoutStillMatchesTheReference) {
  if (!test::repacked_kernels_run()) GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  test::ScopedWeightOnlyLayout rows("rows");
  for (int64_t m : {1, 5}) {
    const test::Shape s{m, 33, 331};
    const auto x = test::normal_vector(size_t(s.m * s.in), 7);
    const auto w = test::normal_vector(size_t(s.out * s.in), 8, 0.05f);
    std::vector<float> ref(size_t(s.m * s.out)), y(ref.size());
    const kernels::Int4Options opt{32, false, true};
    kernels::linear_int4_ref(x.data(), s.m, w.data(), nullptr, s.out, s.in, opt, "t.weight", ref.data());
    auto lin = kernels::make_linear_int4(w.data(), nullptr, s.out, s.in, opt, "t.weight");
    EXPECT_EQ(lin->kernel_path(), "qjoule:avx512_vnni:int4_s8");
    lin->forward(x.data(), s.m, y.data());
    test::expect_within_budget(y, ref, test::budget_scale(x, w, nullptr, s), s, lin->kernel_path());
  }
}

}  // namespace

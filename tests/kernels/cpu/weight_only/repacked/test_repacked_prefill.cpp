// The avx512_bf16 level's prefill of weights repacked at load (gemm_repacked_avx512_bf16.cpp): the rows' panels
// decoded from the repacked layout, so the product equals the rows' prefill (gemm_*_avx512_bf16 on the matrix as
// formats.h stores it) bit for bit where both have the same width, and within 1e-6 of the largest output where
// NVFP4's repacked rows are 16 columns wider (zero weights). Odd shapes: rows not a multiple of 16 (a partial
// last panel), widths with a partial last 128-weight chunk (the decoder's scalar tail), every int4 group and
// zero point, nf4:dq's groups of 256 absmax straddling rows and panels; m from 5 (the first prefill row count)
// to 256 (the whole-panel product), with and without a bias; under whichever panel (BF16 / FP32) this run has
// (ctest runs both). QJOULE_REPACKED_PREFILL=x16 keeps the x16 kernel at every m, and the path says so.
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/quant/quantize_nf4.h"
#include "../weight_only_test_util.h"

namespace {

using namespace qjoule;
using PrefillGemm = std::function<void(const float* bias, const float* x, int64_t m, float* y)>;

// The avx512_bf16 level with AVX512_VNNI: where a repacked layer's prefill may run on the panels.
bool panels_run() {
  return kernels::weight_only_isa() == kernels::WeightOnlyIsa::avx512_bf16 && test::repacked_kernels_run();
}

// x [m, cols] zero-padded to k columns.
std::vector<float> padded_rows(const std::vector<float>& x, int64_t m, int64_t cols, int64_t k) {
  std::vector<float> out(static_cast<std::size_t>(m * k), 0.0f);
  for (int64_t i = 0; i < m; ++i) std::copy(x.begin() + i * cols, x.begin() + (i + 1) * cols, out.begin() + i * k);
  return out;
}

// The repacked prefill (k_repacked columns) against the rows' (k_rows columns) on N outputs.
void expect_prefill_as_rows(const PrefillGemm& repacked, int64_t k_repacked, const PrefillGemm& rows, int64_t k_rows,
                            int64_t N, int64_t cols, unsigned seed) {
  const auto b = test::normal_vector(static_cast<std::size_t>(N), seed + 3);
  for (int64_t m : {5, 33, 256}) {
    SCOPED_TRACE(testing::Message() << "m=" << m);
    const auto x = test::normal_vector(static_cast<std::size_t>(m * cols), seed + 1);
    const auto xr = padded_rows(x, m, cols, k_rows), xp = padded_rows(x, m, cols, k_repacked);
    const float* bias = m == 33 ? nullptr : b.data();
    std::vector<float> want(static_cast<std::size_t>(m * N)), got(want.size());
    rows(bias, xr.data(), m, want.data());
    repacked(bias, xp.data(), m, got.data());
    if (k_rows == k_repacked) {
      ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()), 0)
          << "first difference at " << (std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin()) << ": "
          << *std::mismatch(got.begin(), got.end(), want.begin()).first << " vs "
          << *std::mismatch(got.begin(), got.end(), want.begin()).second;
    } else {
      float largest = 0.0f;
      for (float v : want) largest = std::max(largest, std::fabs(v));
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f * largest) << "at " << i;
    }
  }
}

template <class Block>
void check_int4(int64_t N, int64_t cols, unsigned seed) {
  SCOPED_TRACE(testing::Message() << "int4 G=" << Block::kSize << " " << N << "x" << cols);
  const auto wf = test::normal_vector(static_cast<std::size_t>(N * cols), seed, 0.05f);
  const auto w = quant::quantize_matrix_int4<Block>(wf.data(), N, cols, "t.weight");
  const auto r = kernels::detail::repack_int4(w);
  expect_prefill_as_rows([&](const float* bias, const float* x, int64_t m,
                             float* y) { kernels::detail::gemm_int4_repacked_avx512_bf16_vnni(r, bias, x, m, y); },
                         r.padded_cols(),
                         [&](const float* bias, const float* x, int64_t m, float* y) {
                           kernels::detail::gemm_int4_avx512_bf16(w, bias, x, m, y);
                         },
                         w.padded_cols(), N, cols, seed);
}

template <class Matrix>
void check_nf4(const Matrix& w, unsigned seed) {
  SCOPED_TRACE(std::string(std::is_same_v<Matrix, quant::Nf4DqMatrix> ? "nf4:dq" : "nf4"));
  const auto r = kernels::detail::repack_nf4(w);
  expect_prefill_as_rows([&](const float* bias, const float* x, int64_t m,
                             float* y) { kernels::detail::gemm_nf4_repacked_avx512_bf16_vnni(r, bias, x, m, y); },
                         r.padded_cols(),
                         [&](const float* bias, const float* x, int64_t m, float* y) {
                           if constexpr (std::is_same_v<Matrix, quant::Nf4DqMatrix>) {
                             kernels::detail::gemm_nf4dq_avx512_bf16(w, bias, x, m, y);
                           } else {
                             kernels::detail::gemm_nf4_avx512_bf16(w, bias, x, m, y);
                           }
                         },
                         w.padded_cols(), w.rows, w.cols, seed);
}

template <class Packed>
void check_fp4(const Packed& w, unsigned seed) {
  const auto r = kernels::detail::repack_fp4(w);
  expect_prefill_as_rows([&](const float* bias, const float* x, int64_t m,
                             float* y) { kernels::detail::gemm_fp4_repacked_avx512_bf16_vnni(r, bias, x, m, y); },
                         r.padded_cols(),
                         [&](const float* bias, const float* x, int64_t m, float* y) {
                           kernels::detail::gemm_fp4_avx512_bf16(w, bias, x, m, y);
                         },
                         w.padded_cols(), w.rows, w.cols, seed);
}

TEST(RepackedPrefill, Int4EqualsTheRowsPrefill) {
  if (!panels_run()) GTEST_SKIP() << "the repacked prefill runs on panels at the avx512_bf16 level with AVX512_VNNI";
  check_int4<quant::BlockInt4Sym<32>>(37, 331, 1);
  check_int4<quant::BlockInt4Sym<64>>(16, 256, 2);
  check_int4<quant::BlockInt4Sym<128>>(130, 1100, 3);
  check_int4<quant::BlockInt4Asym<32>>(37, 200, 4);
  check_int4<quant::BlockInt4Asym<64>>(5, 331, 5);
  check_int4<quant::BlockInt4Asym<128>>(33, 640, 6);
}

TEST(RepackedPrefill, Nf4AndNf4DqEqualTheRowsPrefill) {
  if (!panels_run()) GTEST_SKIP() << "the repacked prefill runs on panels at the avx512_bf16 level with AVX512_VNNI";
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 331}, {130, 1100}, {17, 64}}) {
    SCOPED_TRACE(testing::Message() << "nf4 " << rows << "x" << cols);
    const auto wf = test::normal_vector(static_cast<std::size_t>(rows * cols), 7, 0.05f);
    check_nf4(quant::quantize_matrix_nf4(wf.data(), rows, cols, "t.weight"), 8);
    check_nf4(quant::quantize_matrix_nf4_double(wf.data(), rows, cols, "t.weight"), 9);
  }
}

TEST(RepackedPrefill, Fp4FormatsEqualTheRowsPrefill) {
  if (!panels_run()) GTEST_SKIP() << "the repacked prefill runs on panels at the avx512_bf16 level with AVX512_VNNI";
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 331}, {20, 320}, {130, 1100}}) {
    SCOPED_TRACE(testing::Message() << "fp4 " << rows << "x" << cols);
    const auto wf = test::normal_vector(static_cast<std::size_t>(rows * cols), 10, 0.05f);
    check_fp4(quant::quantize_matrix_mxfp4(wf.data(), rows, cols, "t.weight"), 11);
    check_fp4(quant::quantize_matrix_nvfp4(wf.data(), rows, cols, "t.weight"), 12);
  }
}

// Unset, QJOULE_REPACKED_PREFILL leaves the panels to a CPU whose panels run on AMX tiles (the panels' path
// says so), the x16 kernel at every m elsewhere; panels puts the panels' path after the x16 kernel's, x16 keeps
// the x16 kernel at every m, still repacked; a value it does not take is one line.
TEST(RepackedPrefill, ThePathSaysWhichPrefillRuns) {
  if (!panels_run()) GTEST_SKIP() << "the repacked prefill runs on panels at the avx512_bf16 level with AVX512_VNNI";
  const auto w = test::normal_vector(33 * 256, 13, 0.05f);
  const auto path = [&] { return kernels::make_linear_nf4(w.data(), nullptr, 33, 256, {}, "t")->kernel_path(); };
  const std::string panels_path = kernels::avx512::panel_kernel_path();
  const char* forced = std::getenv("QJOULE_REPACKED_PREFILL");  // ctest runs this program with panels, too
  const bool on_panels = forced != nullptr && *forced != '\0' ? std::string(forced) == "panels"
                                                              : panels_path.find("_amx") != std::string::npos;
  EXPECT_EQ(path(), on_panels ? "qjoule:avx512_vnni:nf4_x16_repacked,m>4:" + panels_path
                              : std::string("qjoule:avx512_vnni:nf4_x16_repacked"));
  {
    test::ScopedEnv panels("QJOULE_REPACKED_PREFILL", "panels");
    EXPECT_EQ(path(), "qjoule:avx512_vnni:nf4_x16_repacked,m>4:" + kernels::avx512::panel_kernel_path());
  }
  {
    test::ScopedEnv x16("QJOULE_REPACKED_PREFILL", "x16");
    EXPECT_EQ(path(), "qjoule:avx512_vnni:nf4_x16_repacked");
    EXPECT_EQ(kernels::make_linear_mxfp4(w.data(), nullptr, 33, 256, "t")->kernel_path(),
              "qjoule:avx512_vnni:mxfp4_x16_repacked");
  }
  test::ScopedEnv bad("QJOULE_REPACKED_PREFILL", "amx");
  try {
    (void)path();
    ADD_FAILURE() << "no error for QJOULE_REPACKED_PREFILL=amx";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "QJOULE_REPACKED_PREFILL=amx: expected panels or x16");
  }
}

}  // namespace

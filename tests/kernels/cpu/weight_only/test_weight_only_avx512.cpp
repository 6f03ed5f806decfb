// The AVX-512 weight-only kernels' own cases beyond the per-format tests (which run every ISA level), on
// both AVX-512 levels the CPU runs (avx512: FP32 GEMVs and the AVX2 prefill; avx512_bf16: BF16 GEMVs and
// the BF16 panel prefill): a product wider than one 4 MiB BF16 panel (several oneDNN calls whose dense
// results are copied into column slices of y, the bias offset with them), every GEMV row count 1..4 on
// both sides of the prefill switch, and rows whose length leaves a tail after the last 128-weight chunk.
// Budgets: weight_only_test_util.h (BF16 products: 2^-8 + 1e-5 of Σ|x·w|; FP32: 1e-5). Skips where the
// CPU has no AVX-512.
#include <gtest/gtest.h>

#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

// The AVX-512 levels this CPU runs.
std::vector<kernels::WeightOnlyIsa> avx512_levels() {
  std::vector<kernels::WeightOnlyIsa> levels;
  for (auto isa : test::runnable_isas()) {
    if (isa >= kernels::WeightOnlyIsa::avx512) levels.push_back(isa);
  }
  return levels;
}

template <class Make, class Ref>
void check(const Shape& s, const Make& make, const Ref& ref, unsigned seed) {
  const auto x = test::normal_vector(size_t(s.m * s.in), seed);
  const auto w = test::normal_vector(size_t(s.out * s.in), seed + 1, 0.05f);
  const auto b = test::normal_vector(size_t(s.out), seed + 2);
  std::vector<float> y_ref(size_t(s.m * s.out));
  ref(x.data(), s.m, w.data(), b.data(), s.out, s.in, y_ref.data());
  for (auto isa : avx512_levels()) {
    test::ScopedIsa scoped(isa);
    auto lin = make(w.data(), b.data(), s.out, s.in);
    ASSERT_TRUE(lin->kernel_path().starts_with("qjoule:avx512")) << lin->kernel_path();
    std::vector<float> y(y_ref.size());
    lin->forward(x.data(), s.m, y.data());
    test::expect_within_budget(y, y_ref, test::budget_scale(x, w, b.data(), s), s, lin->kernel_path());
  }
}

TEST(WeightOnlyAvx512, PrefillAcrossSeveralBf16Panels) {
  if (avx512_levels().empty()) GTEST_SKIP() << "this CPU has no AVX-512 (F/BW/VL/DQ): the AVX-512 kernels cannot run";
  // in = 8192: a 4 MiB BF16 panel holds 256 rows, so 300 rows take two panels (256 + 44).
  const Shape s{5, 300, 8192};
  check(
      s,
      [](const float* w, const float* b, int64_t out, int64_t in) {
        return kernels::make_linear_int4(w, b, out, in, {128, true, false}, "t");
      },
      [](const float* x, int64_t m, const float* w, const float* b, int64_t out, int64_t in, float* y) {
        kernels::linear_int4_ref(x, m, w, b, out, in, {128, true, false}, "t", y);
      },
      31);
  check(
      s,
      [](const float* w, const float* b, int64_t out, int64_t in) {
        return kernels::make_linear_w8(w, b, out, in, "t");
      },
      [](const float* x, int64_t m, const float* w, const float* b, int64_t out, int64_t in, float* y) {
        kernels::linear_w8_ref(x, m, w, b, out, in, "t", y);
      },
      34);
}

// From kWholePanelMinRows (256) rows on, a weight within 16 MiB is decoded into one whole panel by every
// thread and multiplied on oneDNN's threaded matmul (FP32 panels, and BF16 panels under
// WeightOnlyPanel.bf16); either side of the switch, with a row
// tail after the last chunk and an output width that is not a multiple of 16.
TEST(WeightOnlyAvx512, PrefillOfManyRowsOnOneWholePanel) {
  if (avx512_levels().empty()) GTEST_SKIP() << "this CPU has no AVX-512 (F/BW/VL/DQ): the AVX-512 kernels cannot run";
  for (const int64_t m : {255, 256, 300}) {
    const Shape s{m, 90, 200};
    check(
        s,
        [](const float* w, const float* b, int64_t out, int64_t in) {
          return kernels::make_linear_int4(w, b, out, in, {32, false, false}, "t");
        },
        [](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t in, float* y) {
          kernels::linear_int4_ref(x, rows, w, b, out, in, {32, false, false}, "t", y);
        },
        41);
    check(
        s,
        [](const float* w, const float* b, int64_t out, int64_t in) {
          return kernels::make_linear_w8(w, b, out, in, "t");
        },
        [](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t in, float* y) {
          kernels::linear_w8_ref(x, rows, w, b, out, in, "t", y);
        },
        44);
    // Three whole 128-weight chunks, each decoded in the chunk's own order and transposed back.
    const Shape nf4{m, 40, 384};
    check(
        nf4,
        [](const float* w, const float* b, int64_t out, int64_t in) {
          return kernels::make_linear_nf4(w, b, out, in, {false}, "t");
        },
        [](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t in, float* y) {
          kernels::linear_nf4_ref(x, rows, w, b, out, in, {false}, "t", y);
        },
        47);
  }
}

TEST(WeightOnlyAvx512, EveryGemvRowCountAndTheFirstPrefillSizeWithTails) {
  if (avx512_levels().empty()) GTEST_SKIP() << "this CPU has no AVX-512 (F/BW/VL/DQ): the AVX-512 kernels cannot run";
  for (int64_t m = 1; m <= 5; ++m) {
    for (int64_t in : {64, 320, 448}) {  // 0, 2 and 3 full chunks, then a 64-weight tail
      const Shape s{m, 37, in};
      for (bool dq : {false, true}) {
        check(
            s,
            [dq](const float* w, const float* b, int64_t out, int64_t k) {
              return kernels::make_linear_nf4(w, b, out, k, {dq}, "t");
            },
            [dq](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t k, float* y) {
              kernels::linear_nf4_ref(x, rows, w, b, out, k, {dq}, "t", y);
            },
            40 + unsigned(m));
      }
      for (int g : {32, 64}) {
        for (bool asym : {false, true}) {
          const kernels::Int4Options opt{g, asym, false};
          check(
              s,
              [opt](const float* w, const float* b, int64_t out, int64_t k) {
                return kernels::make_linear_int4(w, b, out, k, opt, "t");
              },
              [opt](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t k, float* y) {
                kernels::linear_int4_ref(x, rows, w, b, out, k, opt, "t", y);
              },
              50 + unsigned(m));
        }
      }
      check(
          Shape{m, 37, in + 7},  // w8 rows with a 16-weight masked tail
          [](const float* w, const float* b, int64_t out, int64_t k) {
            return kernels::make_linear_w8(w, b, out, k, "t");
          },
          [](const float* x, int64_t rows, const float* w, const float* b, int64_t out, int64_t k, float* y) {
            kernels::linear_w8_ref(x, rows, w, b, out, k, "t", y);
          },
          60 + unsigned(m));
    }
  }
}

}  // namespace

// make_linear_nf4 (kernels nf4_f32, nf4dq_f32, their BF16 and x16 decode GEMVs, the repacked x16 kernel:
// test_nf4_repacked.cpp) vs linear_nf4_ref, with and without double quantization, every ISA level and decode
// GEMV. Budgets: weight_only_test_util.h. Quantization error vs FP32 weights (quantization_error_vs_fp32:
// Gaussian x and W): relative RMS < 0.11.
#include <gmock/gmock.h>

#include "qjoule/error.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

TEST(LinearNf4, MatchesReferenceAcrossShapesDoubleQuantAndIsas) {
  for (bool dq : {false, true}) {
    for (Shape s : {Shape{1, 7, 64}, Shape{3, 33, 192}, Shape{64, 50, 320}, Shape{9, 20, 1088}, Shape{300, 6, 64},
                    Shape{2, 300, 128}}) {
      const auto x = test::normal_vector(size_t(s.m * s.in), 10);
      const auto w = test::normal_vector(size_t(s.out * s.in), 11, 0.05f);
      const auto b = test::normal_vector(size_t(s.out), 12);
      const float* bias = s.out % 2 == 0 ? b.data() : nullptr;
      std::vector<float> ref(size_t(s.m * s.out));
      kernels::linear_nf4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, {dq}, "t.weight", ref.data());
      const auto scale = test::budget_scale(x, w, bias, s);
      for (const auto& [isa, decode] : test::isas_and_decodes()) {
        test::ScopedIsa scoped(isa);
        test::ScopedWeightOnlyDecode scoped_decode(decode);
        auto lin = kernels::make_linear_nf4(w.data(), bias, s.out, s.in, {dq}, "t.weight");
        std::vector<float> y(ref.size());
        lin->forward(x.data(), s.m, y.data());
        test::expect_within_budget(y, ref, scale, s, lin->kernel_path());
        EXPECT_EQ(lin->format(), "nf4");
        const bool x16 = std::string(decode) == "x16";
        EXPECT_EQ(lin->kernel_path(), kernels::repacked_x16_kernel_path(isa, dq ? "nf4dq" : "nf4", x16));
        const size_t blocks = size_t(s.out * s.in / 64);
        const size_t packed = dq ? blocks * 33 + (blocks + 255) / 256 * 4 + 4 : blocks * 36;
        EXPECT_EQ(lin->bytes_held(), packed + (bias ? size_t(s.out) * 4 : 0));
      }
    }
  }
}

// Any width: a row's last 64-block may be partial (formats.h, "Any width"); widths of real models and a
// prime, decode and prefill, every ISA, with and without double quantization.
TEST(LinearNf4, AnyWidthWithAPartialLastBlockMatchesReference) {
  for (int64_t in : {100, 320, 960, 2880, 331}) {
    for (bool dq : {false, true}) {
      for (int64_t m : {1, 5}) {
        const Shape s{m, 6, in};
        const auto x = test::normal_vector(size_t(s.m * s.in), 41);
        const auto w = test::normal_vector(size_t(s.out * s.in), 42, 0.05f);
        std::vector<float> ref(size_t(s.m * s.out));
        kernels::linear_nf4_ref(x.data(), s.m, w.data(), nullptr, s.out, s.in, {dq}, "pre_classifier.weight",
                                ref.data());
        const auto scale = test::budget_scale(x, w, nullptr, s);
        for (const auto& [isa, decode] : test::isas_and_decodes()) {
          test::ScopedIsa scoped(isa);
          test::ScopedWeightOnlyDecode scoped_decode(decode);
          auto lin = kernels::make_linear_nf4(w.data(), nullptr, s.out, s.in, {dq}, "pre_classifier.weight");
          std::vector<float> y(ref.size());
          lin->forward(x.data(), s.m, y.data());
          test::expect_within_budget(y, ref, scale, s, lin->kernel_path() + (dq ? " dq" : ""));
          const size_t blocks = size_t(s.out * ((in + 63) / 64));
          EXPECT_EQ(lin->bytes_held(), dq ? blocks * 33 + (blocks + 255) / 256 * 4 + 4 : blocks * 36);
        }
      }
    }
  }
}

TEST(LinearNf4, QuantizationErrorVsFp32IsThatOf4Bits) {
  for (bool dq : {false, true}) {
    const double err = test::quantization_error_vs_fp32([dq](const float* w, int64_t out, int64_t in) {
      return kernels::make_linear_nf4(w, nullptr, out, in, {dq}, "t");
    });
    RecordProperty(dq ? "relative_rms dq" : "relative_rms", std::to_string(err));
    EXPECT_LT(err, 0.11) << "double_quant=" << dq;  // measured 0.092
  }
}

}  // namespace

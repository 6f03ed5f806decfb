// make_linear_fp16_weights (kernel f16w_f32; FP32-panel prefill on AVX-512) vs
// linear_fp16_weights_ref, every ISA.
// Budget vs the twin: 1e-5 · Σ|x·w| (weight_only_test_util.h). Quantization error vs FP32 weights
// (quantization_error_vs_fp32): relative RMS < 5e-4 (FP16 keeps 11 significant bits).
#include <gmock/gmock.h>

#include "kernels/cpu/weight_only/panel_matmul.h"
#include "qjoule/error.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

TEST(LinearFp16Weights, MatchesReferenceAcrossShapesAndIsas) {
  for (auto isa : test::runnable_isas()) {
    test::ScopedIsa scoped(isa);
    for (Shape s : {Shape{1, 7, 5}, Shape{3, 33, 100}, Shape{64, 50, 37}, Shape{9, 20, 1100}, Shape{1, 64, 768},
                    Shape{300, 13, 40}}) {
      const auto x = test::normal_vector(size_t(s.m * s.in), 1);
      const auto w = test::normal_vector(size_t(s.out * s.in), 2, 0.05f);
      const auto b = test::normal_vector(size_t(s.out), 3);
      for (bool with_bias : {false, true}) {
        const float* bias = with_bias ? b.data() : nullptr;
        auto lin = kernels::make_linear_fp16_weights(w.data(), bias, s.out, s.in, "t.weight");
        std::vector<float> y(size_t(s.m * s.out)), ref(y.size());
        lin->forward(x.data(), s.m, y.data());
        kernels::linear_fp16_weights_ref(x.data(), s.m, w.data(), bias, s.out, s.in, "t.weight", ref.data());
        test::expect_within_budget(y, ref, test::budget_scale(x, w, bias, s), s, lin->kernel_path());
        EXPECT_EQ(lin->format(), "fp16");
        // The AVX-512 levels add the FP32-panel prefill (panel_matmul.h).
        const bool panel =
            isa >= kernels::WeightOnlyIsa::avx512 && kernels::weight_only_isa() >= kernels::WeightOnlyIsa::avx512;
        EXPECT_EQ(lin->kernel_path(), test::expected_path(isa, "f16w_f32", false) +
                                          (panel ? ",m>4:" + kernels::avx512::f32_panel_kernel_path() : ""));
        EXPECT_EQ(lin->bytes_held(), size_t(s.out * s.in) * 2 + (with_bias ? size_t(s.out) * 4 : 0));
        EXPECT_EQ(lin->in_features(), s.in);
        EXPECT_EQ(lin->out_features(), s.out);
      }
    }
  }
}

TEST(LinearFp16Weights, WeightOutsideFp16RangeIsAnErrorNamingTensorAndIndex) {
  std::vector<float> w(2 * 3, 1.0f);
  w[4] = 70000.0f;
  EXPECT_THAT(
      [&] { kernels::make_linear_fp16_weights(w.data(), nullptr, 2, 3, "enc.1.q.weight"); },
      ::testing::ThrowsMessage<Error>(::testing::AllOf(
          ::testing::HasSubstr("enc.1.q.weight"), ::testing::HasSubstr("[1, 1]"), ::testing::HasSubstr("FP16 range"))));
}

TEST(LinearFp16Weights, QuantizationErrorVsFp32IsSmall) {
  const double err = test::quantization_error_vs_fp32([](const float* w, int64_t out, int64_t in) {
    return kernels::make_linear_fp16_weights(w, nullptr, out, in, "t");
  });
  RecordProperty("relative_rms", std::to_string(err));
  EXPECT_LT(err, 5e-4);
}

}  // namespace

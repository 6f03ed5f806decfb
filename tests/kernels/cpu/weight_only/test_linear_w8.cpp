// make_linear_w8 (kernel w8_f32; at the avx2 and avx512 levels decode on w8_x16 or the FP32 GEMV) vs
// linear_w8_ref, every ISA and both decode GEMVs. Budget vs the twin: 1e-5 · Σ|x·w|, and for x16 decode
// + 2^-15 · Σ_blocks max|x| · Σ|w| (weight_only_test_util.h). Quantization error vs FP32 weights
// (quantization_error_vs_fp32): relative RMS < 1e-2 (per-row INT8 of Gaussian weights: ≈0.007).
#include <gmock/gmock.h>

#include "qjoule/error.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

TEST(LinearW8, MatchesReferenceAcrossShapesAndIsas) {
  for (auto [isa, decode] : test::isas_and_decodes(&kernels::w8_x16_decode_available)) {
    test::ScopedIsa scoped(isa);
    test::ScopedWeightOnlyDecode scoped_decode(decode);
    const bool x16 = std::string(decode) == "x16" && kernels::w8_x16_decode_available(isa);
    for (Shape s : {Shape{1, 7, 5}, Shape{3, 33, 100}, Shape{64, 50, 37}, Shape{9, 20, 1100}, Shape{1, 64, 768},
                    Shape{300, 13, 40}, Shape{2, 17, 96}, Shape{4, 40, 70}, Shape{1, 3, 31}, Shape{5, 9, 64}}) {
      const auto x = test::normal_vector(size_t(s.m * s.in), 4);
      const auto w = test::normal_vector(size_t(s.out * s.in), 5, 0.05f);
      const auto b = test::normal_vector(size_t(s.out), 6);
      for (bool with_bias : {false, true}) {
        const float* bias = with_bias ? b.data() : nullptr;
        auto lin = kernels::make_linear_w8(w.data(), bias, s.out, s.in, "t.weight");
        std::vector<float> y(size_t(s.m * s.out)), ref(y.size());
        lin->forward(x.data(), s.m, y.data());
        kernels::linear_w8_ref(x.data(), s.m, w.data(), bias, s.out, s.in, "t.weight", ref.data());
        test::expect_within_budget(y, ref, test::budget_scale(x, w, bias, s), s, lin->kernel_path());
        EXPECT_EQ(lin->format(), "w8");
        EXPECT_EQ(lin->kernel_path(), kernels::w8_kernel_path(isa, x16));
        if (x16) {
          EXPECT_TRUE(lin->kernel_path().starts_with(isa == kernels::WeightOnlyIsa::avx2 ? "qjoule:avx2:w8_x16,m>4:"
                                                                                         : "qjoule:avx512:w8_x16,m>4:"))
              << lin->kernel_path();
        } else {
          EXPECT_EQ(lin->kernel_path(), test::expected_path(isa, "w8_f32", true, true));
        }
        EXPECT_EQ(lin->bytes_held(), size_t(s.out * s.in) + size_t(s.out) * 4 + (with_bias ? size_t(s.out) * 4 : 0));
      }
    }
  }
}

TEST(LinearW8, NanWeightIsAnErrorNamingTensorAndIndex) {
  std::vector<float> w(4 * 5, 1.0f);
  w[3 * 5 + 4] = std::nanf("");
  EXPECT_THAT([&] { kernels::make_linear_w8(w.data(), nullptr, 4, 5, "enc.2.ffn.lin1.weight"); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("enc.2.ffn.lin1.weight"),
                                                               ::testing::HasSubstr("NaN at [3, 4]"))));
}

TEST(LinearW8, QuantizationErrorVsFp32IsSmall) {
  const double err = test::quantization_error_vs_fp32(
      [](const float* w, int64_t out, int64_t in) { return kernels::make_linear_w8(w, nullptr, out, in, "t"); });
  RecordProperty("relative_rms", std::to_string(err));
  EXPECT_LT(err, 1e-2);
}

}  // namespace

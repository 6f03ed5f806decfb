// make_linear_int4 (kernels int4_f32 and int4_s8) vs linear_int4_ref, for G = 32/64/128, sym and
// asym, both ISAs. Budget vs the twin: 1e-5 · Σ|x·w| (weight_only_test_util.h). Quantization error
// vs FP32 weights (quantization_error_vs_fp32: Gaussian x and W): relative RMS < 0.13 for every G,
// scheme and activation type (4-bit theory ≈ step/√12: 0.08–0.11).
#include <gmock/gmock.h>

#include <cmath>
#include <limits>
#include <utility>

#include "qjoule/error.h"
#include "weight_only_test_util.h"

namespace {

using namespace qjoule;
using qjoule::test::Shape;

std::string describe(const kernels::Int4Options& o) {
  return "G=" + std::to_string(o.group_size) + (o.asymmetric ? " asym" : " sym") +
         (o.int8_activations ? " s8" : " f32");
}

TEST(LinearInt4, MatchesReferenceAcrossGroupsSchemesActivationsShapesAndIsas) {
  for (int g : {32, 64, 128}) {
    for (bool asym : {false, true}) {
      for (bool s8 : {false, true}) {
        const kernels::Int4Options opt{g, asym, s8};
        for (Shape s :
             {Shape{1, 7, 128}, Shape{3, 33, 256}, Shape{64, 24, 384}, Shape{9, 20, 1152}, Shape{300, 6, 128}}) {
          const auto x = test::normal_vector(size_t(s.m * s.in), 7);
          const auto w = test::normal_vector(size_t(s.out * s.in), 8, 0.05f);
          const auto b = test::normal_vector(size_t(s.out), 9);
          const float* bias = s.out % 2 == 0 ? b.data() : nullptr;
          std::vector<float> ref(size_t(s.m * s.out));
          kernels::linear_int4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, opt, "t.weight", ref.data());
          const auto scale = test::budget_scale(x, w, bias, s);
          for (const auto& [isa, decode] : test::isas_and_decodes()) {
            test::ScopedIsa scoped(isa);
            test::ScopedWeightOnlyDecode scoped_decode(decode);
            auto lin = kernels::make_linear_int4(w.data(), bias, s.out, s.in, opt, "t.weight");
            std::vector<float> y(ref.size());
            lin->forward(x.data(), s.m, y.data());
            test::expect_within_budget(y, ref, scale, s, lin->kernel_path() + " " + describe(opt));
            EXPECT_EQ(lin->format(), "int4");
            EXPECT_EQ(lin->kernel_path(), s8 ? kernels::int4_s8_kernel_path(isa)
                                             : kernels::int4_kernel_path(isa, std::string(decode) == "x16"));
            const size_t block_bytes = size_t(asym ? 4 : 2) + size_t(g / 2);
            EXPECT_EQ(lin->bytes_held(), size_t(s.out * (s.in / g)) * block_bytes + (bias ? size_t(s.out) * 4 : 0));
          }
        }
      }
    }
  }
}

// The layer built on every ISA against its twin (budget: weight_only_test_util.h), with bias; bytes held
// count ceil(in / G) blocks per row (a partial last group is held whole) and the FP32 bias.
void expect_int4_matches_reference(const kernels::Int4Options& opt, const Shape& s, unsigned seed) {
  const auto x = test::normal_vector(size_t(s.m * s.in), seed);
  const auto w = test::normal_vector(size_t(s.out * s.in), seed + 1, 0.05f);
  const auto b = test::normal_vector(size_t(s.out), seed + 2);
  std::vector<float> ref(size_t(s.m * s.out));
  kernels::linear_int4_ref(x.data(), s.m, w.data(), b.data(), s.out, s.in, opt, "t.weight", ref.data());
  const auto scale = test::budget_scale(x, w, b.data(), s);
  const int64_t g = opt.group_size;
  const size_t block_bytes = size_t(opt.asymmetric ? 4 : 2) + size_t(g / 2);
  for (const auto& [isa, decode] : test::isas_and_decodes()) {
    test::ScopedIsa scoped(isa);
    test::ScopedWeightOnlyDecode scoped_decode(decode);
    auto lin = kernels::make_linear_int4(w.data(), b.data(), s.out, s.in, opt, "t.weight");
    EXPECT_EQ(lin->in_features(), s.in);
    std::vector<float> y(ref.size());
    lin->forward(x.data(), s.m, y.data());
    test::expect_within_budget(y, ref, scale, s, lin->kernel_path() + " " + describe(opt));
    EXPECT_EQ(lin->bytes_held(), size_t(s.out * ((s.in + g - 1) / g)) * block_bytes + size_t(s.out) * 4);
  }
}

// G = 32 allows in % 64 == 32: the last 32 columns take the natural-order decode32 path.
TEST(LinearInt4, Group32WithAnOdd32ColumnTailMatchesReference) {
  for (bool asym : {false, true}) {
    for (bool s8 : {false, true}) {
      for (Shape s : {Shape{1, 5, 96}, Shape{3, 9, 160}, Shape{2, 9, 608}, Shape{20, 9, 608}}) {
        expect_int4_matches_reference({32, asym, s8}, s, 13);
      }
    }
  }
}

// Any width (formats.h, "Any width"): a row's last group may be partial, for widths that real models
// have (320: BERT-small hidden, 960: SmolLM-360M hidden, 2880) and a prime; decode (m = 1) and
// prefill (m = 5) on every ISA, against the twin.
TEST(LinearInt4, AnyWidthWithAPartialLastGroupMatchesReference) {
  for (int64_t in : {320, 960, 2880, 331}) {
    for (int g : {32, 64, 128}) {
      for (bool asym : {false, true}) {
        for (bool s8 : {false, true}) {
          for (int64_t m : {1, 5}) expect_int4_matches_reference({g, asym, s8}, Shape{m, 6, in}, 31);
        }
      }
    }
  }
}

// int4:a8 runs qjoule's VNNI kernel (on weights repacked at load) at the avx512 levels where the CPU has
// AVX512_VNNI (checked here through the compiler's own CPUID reading, not the library's), AVX2 below them.
TEST(LinearInt4, A8RunsOnAvx512VnniWhereTheCpuHasIt) {
  __builtin_cpu_init();
  if (kernels::weight_only_isa() < kernels::WeightOnlyIsa::avx512 || __builtin_cpu_supports("avx512vnni") == 0) {
    GTEST_SKIP() << "this CPU has no AVX-512 with VNNI";
  }
  std::vector<float> w(8 * 256, 0.25f);
  {
    test::ScopedIsa scoped(kernels::WeightOnlyIsa::avx512);
    EXPECT_EQ(kernels::make_linear_int4(w.data(), nullptr, 8, 256, {32, false, true}, "t")->kernel_path(),
              "qjoule:avx512_vnni:int4_s8_repacked");
  }
  test::ScopedIsa scoped(kernels::WeightOnlyIsa::avx2);
  EXPECT_EQ(kernels::make_linear_int4(w.data(), nullptr, 8, 256, {32, false, true}, "t")->kernel_path(),
            "qjoule:avx2:int4_s8");
}

// int4 can decode on 16-bit integer activations where the CPU has AVX512_VNNI (CPUID read here) and at the avx2
// level; which GEMV a layout runs is measured once per process (the same answer for every layer after the first)
// or said by QJOULE_WEIGHT_ONLY_DECODE=x16|float; any other value is one line naming it.
TEST(LinearInt4, DecodeGemvIsMeasuredOnceOrToldWhereTheLevelHasTwo) {
  std::vector<float> w(8 * 256, 0.25f);
  const auto path = [&] {
    return kernels::make_linear_int4(w.data(), nullptr, 8, 256, {32, false, false}, "t")->kernel_path();
  };
  __builtin_cpu_init();
  const auto isa = kernels::weight_only_isa();
  const bool vnni = isa >= kernels::WeightOnlyIsa::avx512 && kernels::cpu_supports_avx512_weight_only() &&
                    __builtin_cpu_supports("avx512vnni") != 0;
  const bool avx2 = isa == kernels::WeightOnlyIsa::avx2;
  EXPECT_EQ(kernels::x16_decode_available(isa), vnni);
  EXPECT_EQ(kernels::any_x16_decode_available(isa), vnni || avx2);
  const std::string measured = path();
  EXPECT_EQ(path(), measured);  // kept, not measured again
  if (!vnni && !avx2) {
    EXPECT_EQ(measured.find("int4_x16"), std::string::npos) << measured;
    return;
  }
  RecordProperty("int4:g=32:sym decode", measured);
  {
    test::ScopedWeightOnlyDecode decode("x16");
    if (vnni) {
      EXPECT_TRUE(test::is_repacked_x16_path(path(), "int4")) << path();
    } else {
      EXPECT_EQ(path(), "qjoule:avx2:int4_x16,m>4:qjoule:avx2:int4_f32");
    }
  }
  {
    test::ScopedWeightOnlyDecode decode("float");
    EXPECT_EQ(path().find("int4_x16"), std::string::npos) << path();
  }
  test::ScopedWeightOnlyDecode decode("fast");
  EXPECT_THAT(
      path, ::testing::ThrowsMessage<Error>(::testing::StrEq("QJOULE_WEIGHT_ONLY_DECODE=fast: expected x16 or float")));
}

// int4's, nf4's and w8's x16 GEMVs: a NaN or Inf in a decode row leaves the whole product to the FP32 / BF16
// GEMV: that row is NaN (never a number made from an integer that stood for a NaN), the other rows
// finite and within that GEMV's budget (2^-8 of Σ|x·w| ≈ 10 here); a row of zeros gives the bias.
TEST(LinearInt4, X16DecodeOfNonFiniteAndZeroRows) {
  const int64_t out = 6, in = 320;
  const auto w = test::normal_vector(size_t(out * in), 41, 0.05f);
  const auto b = test::normal_vector(size_t(out), 42);
  test::ScopedWeightOnlyDecode decode("x16");
  for (auto isa : test::runnable_isas()) {
    test::ScopedIsa scoped(isa);
    for (const auto& lin : {kernels::make_linear_int4(w.data(), b.data(), out, in, {32, true, false}, "t"),
                            kernels::make_linear_nf4(w.data(), b.data(), out, in, {false}, "t"),
                            kernels::make_linear_w8(w.data(), b.data(), out, in, "t")}) {
      auto x = test::normal_vector(size_t(3 * in), 43);
      std::fill(x.begin() + in, x.begin() + 2 * in, 0.0f);  // row 1: zeros
      std::vector<float> y(size_t(3 * out)), finite(size_t(3 * out));
      lin->forward(x.data(), 3, finite.data());
      for (int64_t o = 0; o < out; ++o) EXPECT_NEAR(finite[size_t(out + o)], b[size_t(o)], 1e-6f) << lin->kernel_path();
      x[size_t(2 * in + 17)] = std::numeric_limits<float>::quiet_NaN();
      x[size_t(2 * in + 300)] = std::numeric_limits<float>::infinity();
      lin->forward(x.data(), 3, y.data());
      for (int64_t o = 0; o < out; ++o) {
        EXPECT_TRUE(std::isnan(y[size_t(2 * out + o)])) << lin->kernel_path() << " " << y[size_t(2 * out + o)];
        EXPECT_NEAR(y[size_t(o)], finite[size_t(o)], 0.05f) << lin->kernel_path();
      }
    }
  }
}

TEST(LinearInt4, AnUnsupportedGroupSizeIsAnErrorNamingTheTensor) {
  std::vector<float> w(3 * 96, 0.1f);
  EXPECT_THAT(
      [&] {
        kernels::make_linear_int4(w.data(), nullptr, 3, 96, {48, false, false}, "enc.0.attn.v.weight");
      },
      ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("enc.0.attn.v.weight"),
                                                       ::testing::HasSubstr("expected 32, 64 or 128"))));
}

TEST(LinearInt4, NanActivationOnTheS8PathNamesTheLayer) {
  std::vector<float> w(4 * 64, 0.1f), x(2 * 64, 1.0f);
  x[64 + 10] = std::nanf("");
  std::vector<float> y(2 * 4);
  for (auto isa : test::runnable_isas()) {
    test::ScopedIsa scoped(isa);
    auto lin = kernels::make_linear_int4(w.data(), nullptr, 4, 64, {32, false, true}, "enc.3.ffn.lin2.weight");
    EXPECT_THAT([&] { lin->forward(x.data(), 2, y.data()); },
                ::testing::ThrowsMessage<Error>(
                    ::testing::AllOf(::testing::HasSubstr("enc.3.ffn.lin2.weight"), ::testing::HasSubstr("[1, 10]"))));
  }
}

TEST(LinearInt4, QuantizationErrorVsFp32IsThatOf4Bits) {
  for (int g : {32, 64, 128}) {
    for (bool asym : {false, true}) {
      for (bool s8 : {false, true}) {
        const kernels::Int4Options opt{g, asym, s8};
        const double err = test::quantization_error_vs_fp32([&opt](const float* w, int64_t out, int64_t in) {
          return kernels::make_linear_int4(w, nullptr, out, in, opt, "t");
        });
        RecordProperty("relative_rms " + describe(opt), std::to_string(err));
        EXPECT_LT(err, 0.13) << describe(opt);  // measured 0.076 (G=32 asym) .. 0.113 (G=128 sym)
      }
    }
  }
}

}  // namespace

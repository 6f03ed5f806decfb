// make_linear: precision specs, dispatch to the real kernel of each format, and `emulate`.
// Budgets: real layer vs FP32, relative RMS error per format (sanity of the dispatch; the kernels'
// own tests hold the tight budgets): bf16 1%, fp16 0.1%, int8 3%, w8 1%, int4 / nf4 15%.
// Emulated vs real layer of the same format: max |Δ| ≤ 1e-4 · max|real| — same quantizers, only FP32
// summation order differs — so emulation's accuracy figures stand for the format's.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "random_data.h"

#include "error_of.h"
#include "qjoule/error.h"
#include "qjoule/kernels/make_linear.h"

namespace {

using namespace qjoule::kernels;
namespace quant = qjoule::quant;
using ::testing::HasSubstr;

using qjoule::test::random_vector;

using qjoule::test::error_of;

TEST(MakeLinear, EveryPrecisionRunsItsOwnKernelAndEmulationReproducesIt) {
  const int64_t m = 9, out = 48, in = 256;
  const auto x = random_vector(size_t(m * in), 1);
  const auto w = random_vector(size_t(out * in), 2, 0.05f);
  const auto b = random_vector(size_t(out), 3);
  auto fp32 = make_linear(quant::parse_format_spec("fp32"), w.data(), b.data(), out, in, "t");
  std::vector<float> ref(size_t(m * out));
  fp32->forward(x.data(), m, ref.data());
  const std::vector<std::pair<std::string, double>> specs = {
      {"bf16", 0.01},           {"fp16", 0.001},   {"int8", 0.03}, {"w8", 0.01},    {"int4", 0.15},
      {"int4:g=32:asym", 0.15}, {"int4:a8", 0.15}, {"nf4", 0.15},  {"nf4:dq", 0.15}};
  for (const auto& [spec, budget] : specs) {
    const quant::FormatSpec f = quant::parse_format_spec(spec);
    auto real = make_linear(f, w.data(), b.data(), out, in, "layer.0.ffn.lin1");
    EXPECT_EQ(real->format(), quant::name(f.format)) << spec;
    EXPECT_EQ(real->kernel_path().find("emulated"), std::string::npos) << spec << ": " << real->kernel_path();
    std::vector<float> y(ref.size());
    real->forward(x.data(), m, y.data());
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
      err += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
      norm += double(ref[i]) * ref[i];
    }
    EXPECT_LT(std::sqrt(err / norm), budget) << spec << " via " << real->kernel_path();

    quant::FormatSpec ef = f;
    ef.emulate = true;
    auto emulated = make_linear(ef, w.data(), b.data(), out, in, "layer.0.ffn.lin1");
    EXPECT_EQ(emulated->format(), quant::name(f.format));
    EXPECT_EQ(emulated->kernel_path().rfind("emulated:not_representative:", 0), 0u) << emulated->kernel_path();
    std::vector<float> ye(ref.size());
    emulated->forward(x.data(), m, ye.data());
    float max_real = 0.0f;
    for (float v : y) max_real = std::max(max_real, std::fabs(v));
    // Kernels that multiply in BF16 (AVX-512 BF16: "bf16_panel" prefill, "avx512_bf16:" GEMV) round the
    // activations and dequantized weights to BF16 (2^-9 each), which FP32 emulation does not.
    const std::string path = real->kernel_path();
    const bool bf16_compute = spec != "bf16" && (path.find("bf16_panel") != std::string::npos ||
                                                 path.find("avx512_bf16:") != std::string::npos);
    const float tolerance = (bf16_compute ? 1e-2f : 1e-4f) * max_real;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(ye[i], y[i], tolerance) << spec << " i=" << i << " " << path;
  }
}

TEST(MakeLinear, KernelPathsNameTheActivationPath) {
  const auto w = random_vector(size_t(32 * 128), 4);
  EXPECT_NE(
      make_linear(quant::parse_format_spec("int4:a8"), w.data(), nullptr, 32, 128, "t")->kernel_path().find("int4_s8"),
      std::string::npos);
  const std::string int4 =
      make_linear(quant::parse_format_spec("int4"), w.data(), nullptr, 32, 128, "t")->kernel_path();
  EXPECT_TRUE(int4.find("int4_f32") != std::string::npos || int4.find("int4_bf16") != std::string::npos ||
              int4.find("int4_x16") != std::string::npos)
      << int4;
  EXPECT_EQ(int4.find("int4_s8"), std::string::npos) << int4;
  EXPECT_NE(
      make_linear(quant::parse_format_spec("int8"), w.data(), nullptr, 32, 128, "t")->kernel_path().find("u8s8s32"),
      std::string::npos);
}

TEST(MakeLinear, RejectsMisuse) {
  const auto w = random_vector(size_t(8 * 64), 5);
  const std::vector<float> s(64, 2.0f);
  quant::FormatSpec cuda_only;
  cuda_only.format = quant::Format::fp8;
  const std::string e = error_of([&] { make_linear(cuda_only, w.data(), nullptr, 8, 64, "layer.3.attention.q_lin"); });
  EXPECT_THAT(e, HasSubstr("layer.3.attention.q_lin: fp8 runs on CUDA only; on the CPU expected one of fp32, bf16, "
                           "fp16, int8, w8, int4, nf4"));
  EXPECT_NE(error_of([&] {
              make_linear(quant::parse_format_spec("w8"), w.data(), nullptr, 8, 64, "t", s.data());
            }).find("int8 only"),
            std::string::npos);
  auto fp32_emulated = make_linear(quant::parse_format_spec("fp32:emulate"), w.data(), nullptr, 8, 64, "t");
  EXPECT_EQ(fp32_emulated->kernel_path().find("emulated"), std::string::npos) << "fp32 is simply fp32";
  auto smoothed = make_linear(quant::parse_format_spec("int8:emulate"), w.data(), nullptr, 8, 64, "t", s.data());
  EXPECT_NE(smoothed->kernel_path().find("+smoothed"), std::string::npos) << smoothed->kernel_path();
}

// GPTQ's codes need calibration inputs: from the weights alone make_linear refuses, never running
// round-to-nearest under GPTQ's name.
TEST(MakeLinear, CalibratedInt4FromWeightsAloneIsOneLineNotRoundToNearest) {
  const auto w = random_vector(size_t(8 * 64), 6);
  const std::string e = error_of([&] {
    make_linear(quant::parse_format_spec("int4:g=32:gptq"), w.data(), nullptr, 8, 64, "model.layers.0.mlp.up_proj");
  });
  EXPECT_THAT(e, HasSubstr("model.layers.0.mlp.up_proj: precision 'int4:g=32:sym:gptq' needs calibration inputs"));
  EXPECT_THAT(e, HasSubstr("expected int4:g=32:sym for round-to-nearest elsewhere"));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace

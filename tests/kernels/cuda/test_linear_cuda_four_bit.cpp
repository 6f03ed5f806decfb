// The 4-bit CUDA layers (int4, nf4, nf4:dq, mxfp4, nvfp4: make_linear_cuda) against their CPU _ref twins, on
// both paths, and the FP4 formats' host-side checks, which run everywhere the CUDA backend is built.
//
// Budgets, per output element, with S = Σ_k |x_k · w_k| + |b| (FP32 x and W; cuda_linear_checks.h):
//   m ≤ 8 (GEMV)    2e-5 · S   vs linear_*_ref: FP32 vs double sums; FP4 scales a word's sum by s_b · s_t
//                              where the reference rounds E2M1 · s_b, then · s_t (one FP32 rounding apart)
//   m > 8 (panels)  2e-3 · S   the dequantized weights and x rounded to FP16 (2 · 2⁻¹¹)
// and every output is written (y is NaN-poisoned first). QJOULE_CUDA_GEMV4=plain runs these again with the
// other decode GEMV (ctest: CudaLinearGpu.FourBitPlain); nvfp4 keeps the split one.
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda_linear_checks.h"
#include "error_of.h"
#include "kernels/cuda/linear_cuda_device.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "random_data.h"

namespace qjoule::kernels {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

quant::FormatSpec precision(const std::string& spec) { return quant::parse_format_spec(spec); }

// ---- everywhere: the FP4 formats' checks ------------------------------------------------------------

TEST(CudaLinearFp4, WidthsOfPartialBlocksAreOneLineErrors) {
  const std::vector<float> w(4 * 40, 0.1f);
  for (const auto& [spec, block] : {std::pair<std::string, int>{"mxfp4", 32}, {"nvfp4", 16}}) {
    const std::string e =
        error_of([&] { make_linear_cuda(precision(spec), w.data(), nullptr, 4, 40, "dec.0.mlp.up.weight"); });
    EXPECT_THAT(
        e, AllOf(HasSubstr("tensor 'dec.0.mlp.up.weight'"), HasSubstr("in_features 40 is not a multiple of the " +
                                                                      spec + " block size " + std::to_string(block))));
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

// nvfp4 names the split GEMV whatever QJOULE_CUDA_GEMV4 says; mxfp4 follows it, as int4 and nf4 do.
TEST(CudaLinearFp4, KernelPathsNameTheGemvThatRuns) {
  const auto path = [](const std::string& spec) {
    std::string p;
    for (const auto* row : backend_formats(Backend::cuda))
      if (quant::name(row->format) == spec)
        for (const auto& k : row->kernels) p += k.kernel_path + ";";
    return p;
  };
  EXPECT_EQ(path("nvfp4"), "qjoule:cuda:nvfp4_gemv_split+f16_cublaslt;");
  EXPECT_EQ(path("mxfp4"), "qjoule:cuda:mxfp4_gemv_split+f16_cublaslt;qjoule:cuda:mxfp4_gemv+f16_cublaslt;");
}

// ---- on a GPU: each format against its CPU reference -----------------------------------------------

#if QJOULE_HAVE_CUDA

struct FourBit {
  std::string name;
  quant::FormatSpec format;
};

std::vector<FourBit> four_bit_formats() {
  std::vector<FourBit> all;
  for (int g : {32, 64, 128})
    for (bool asym : {false, true}) {
      quant::FormatSpec f = precision("int4");
      f.group_size = g;
      f.int4_asymmetric = asym;
      all.push_back({"int4 g" + std::to_string(g) + (asym ? " asym" : " sym"), f});
    }
  for (bool dq : {false, true}) {
    quant::FormatSpec f = precision("nf4");
    f.nf4_double_quant = dq;
    all.push_back({dq ? "nf4 dq" : "nf4", f});
  }
  all.push_back({"mxfp4", precision("mxfp4")});
  all.push_back({"nvfp4", precision("nvfp4")});
  return all;
}

std::vector<float> four_bit_reference(const quant::FormatSpec& f, const std::vector<float>& x,
                                      const std::vector<float>& w, const float* bias, const Shape& s) {
  std::vector<float> ref(static_cast<std::size_t>(s.m * s.out));
  if (f.format == quant::Format::int4) {
    linear_int4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, Int4Options{f.group_size, f.int4_asymmetric, false},
                    "t.weight", ref.data());
  } else if (f.format == quant::Format::mxfp4) {
    linear_mxfp4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, "t.weight", ref.data());
  } else if (f.format == quant::Format::nvfp4) {
    linear_nvfp4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, "t.weight", ref.data());
  } else {
    linear_nf4_ref(x.data(), s.m, w.data(), bias, s.out, s.in, Nf4Options{f.nf4_double_quant}, "t.weight", ref.data());
  }
  return ref;
}

std::size_t packed_bytes(const quant::FormatSpec& f, const Shape& s) {
  if (f.format == quant::Format::int4) {
    // The device keeps d (FP16), the zero point (asym) and the codes; not asym's reserved byte.
    const std::size_t block = std::size_t(f.int4_asymmetric ? 3 : 2) + std::size_t(f.group_size / 2);
    return static_cast<std::size_t>(s.out * (s.in / f.group_size)) * block;
  }
  // FP4: a scale byte and the codes of each block; nvfp4 also its tensor scale (a kernel argument).
  if (f.format == quant::Format::mxfp4) return static_cast<std::size_t>(s.out * s.in / 32) * 17;
  if (f.format == quant::Format::nvfp4) return static_cast<std::size_t>(s.out * s.in / 16) * 9 + 4;
  const auto blocks = static_cast<std::size_t>(s.out * s.in / 64);
  return f.nf4_double_quant ? blocks * 33 + (blocks + 255) / 256 * 4 + 4 : blocks * 36;
}

TEST(CudaLinearGpu, FourBitFormatsMatchTheirCpuReferencesOnBothPaths) {
  QJOULE_REQUIRE_GPU();
  // (2, 40, 5632): a 1.1B down projection's width, 5½ steps of the GEMVs' 1,024 codes.
  const std::vector<Shape> shapes = {{1, 64, 256},    {7, 64, 256},     {64, 64, 256}, {1, 1000, 4096},
                                     {7, 1000, 4096}, {64, 1000, 4096}, {2, 40, 5632}};
  for (const FourBit& fb : four_bit_formats()) {
    for (const Shape& s : shapes) {
      const auto x = test::random_vector(static_cast<std::size_t>(s.m * s.in), 41);
      const auto w = test::random_vector(static_cast<std::size_t>(s.out * s.in), 42, 0.05f);
      const auto bv = test::random_vector(static_cast<std::size_t>(s.out), 43);
      const float* bias = s.m % 2 == 1 ? bv.data() : nullptr;
      SCOPED_TRACE(describe(fb.name, s));
      const auto layer = make_linear_cuda(fb.format, w.data(), bias, s.out, s.in, "t.weight");
      const std::string name(quant::name(fb.format.format));
      const std::string short_name =
          fb.format.format == quant::Format::nf4 && fb.format.nf4_double_quant ? "nf4dq" : name;
      EXPECT_EQ(layer->format(), name);
      // QJOULE_CUDA_GEMV4=plain (the ctest run CudaLinearGpu.FourBitPlain) names the other GEMV, but for nvfp4.
      const bool split = cuda_detail::gemv4_split() || fb.format.format == quant::Format::nvfp4;
      const std::string gemv_name = short_name + (split ? "_gemv_split" : "_gemv");
      EXPECT_EQ(layer->kernel_path(), "qjoule:cuda:" + gemv_name + "+f16_cublaslt");
      const bool gemv = s.m <= cuda_detail::kGemvMaxRows;
      EXPECT_EQ(layer->kernel_path_for(s.m), gemv
                                                 ? "qjoule:cuda:" + gemv_name
                                                 : "qjoule:cuda:" + short_name + "_dequant_f16+cublaslt:f16:tensor_op");
      EXPECT_EQ(layer->bytes_held(), packed_bytes(fb.format, s) + (bias ? static_cast<std::size_t>(s.out) * 4 : 0));
      const auto y = run_layer(*layer, x, s);
      expect_within(y, four_bit_reference(fb.format, x, w, bias, s), budget_scale(x, w, bias, s), gemv ? 2e-5 : 2e-3,
                    layer->kernel_path_for(s.m));
    }
  }
}

// m = 9 is the first panel-path size, and in = 16384 makes 1100 output rows two panels (1024 + 76).
TEST(CudaLinearGpu, FourBitPanelPathAcrossSeveralPanels) {
  QJOULE_REQUIRE_GPU();
  const Shape s{9, 1100, 16384};
  ASSERT_EQ(cuda_detail::weight_panel_rows(s.out, s.in), 1024);
  const auto x = test::random_vector(static_cast<std::size_t>(s.m * s.in), 51);
  const auto w = test::random_vector(static_cast<std::size_t>(s.out * s.in), 52, 0.05f);
  const auto bv = test::random_vector(static_cast<std::size_t>(s.out), 53);
  for (const FourBit& fb : four_bit_formats()) {
    if (fb.name != "int4 g128 sym" && fb.name != "nf4 dq" && fb.name != "nvfp4") continue;
    SCOPED_TRACE(describe(fb.name, s));
    const auto layer = make_linear_cuda(fb.format, w.data(), bv.data(), s.out, s.in, "t.weight");
    expect_within(run_layer(*layer, x, s), four_bit_reference(fb.format, x, w, bv.data(), s),
                  budget_scale(x, w, bv.data(), s), 2e-3, layer->kernel_path_for(s.m));
  }
}

#endif  // QJOULE_HAVE_CUDA

}  // namespace
}  // namespace qjoule::kernels

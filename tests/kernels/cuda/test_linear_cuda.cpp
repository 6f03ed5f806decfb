// CUDA linear layers (make_linear_cuda) against the CPU _ref twins, and their host-side logic.
//
// Without a GPU (or without the CUDA backend) the GPU tests skip with cuda_device_status()'s reason;
// the error paths, the E4M3 conversions, the panel / GEMV choices and the peak table run everywhere.
//
// Budgets of the GPU tests, per output element, with S = Σ_k |x_k · w_k| + |b| (FP32 x and W):
//   fp32                        3e-5 · S   FP32 accumulation in an order cuBLASLt chooses (split-K too)
//   tf32                        3e-3 · S   operands rounded to TF32 (10 mantissa bits) by the GPU
//   fp16, bf16                  1e-4 · S   vs the product of the FP16- / BF16-rounded x and W in double:
//                                          only the tensor cores' FP32 accumulation differs
//   int8                        1e-6 · max|ref|   vs linear_int8_w8a8_ref(qmax 127): same codes, exact
//                                          integer sums, the same FP32 dequantization expression
//   fp8                         2e-3 · Ŝ   vs the same E4M3 codes and scales multiplied in double
//                                          (Ŝ from the dequantized operands): FP8 tensor-core accumulation
//   int4 / nf4, m ≤ 8 (GEMV)    2e-5 · S   vs linear_int4_ref / linear_nf4_ref: FP32 vs double sums
//   int4 / nf4, m > 8 (panels)  2e-3 · S   the dequantized weights and x rounded to FP16 (2 · 2⁻¹¹)
// and every output is written (y is NaN-poisoned first).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cuda_linear_checks.h"
#include "error_of.h"
#include "kernels/cuda/gemv_dense_cuda.h"
#include "kernels/cuda/linear_cuda_device.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/linear_onednn_lowp.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/quant/fp16_convert.h"
#include "random_data.h"
#if QJOULE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace qjoule::kernels {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

quant::FormatSpec precision(const std::string& spec) { return quant::parse_format_spec(spec); }

std::vector<std::string> cuda_format_list() {
  std::vector<std::string> names;
  for (const auto* row : backend_formats(Backend::cuda)) names.emplace_back(quant::name(row->format));
  return names;
}

// ---- everywhere: the factory's checks ---------------------------------------------------------------

TEST(CudaLinear, SupportedPrecisions) {
  EXPECT_THAT(cuda_format_list(),
              ::testing::ElementsAre("fp32", "bf16", "fp16", "int8", "int4", "nf4", "tf32", "fp8", "mxfp4", "nvfp4"));
}

TEST(CudaLinear, FormatsWithoutACudaKernelAreOneLineErrorsNamingTheTensor) {
  const std::vector<float> w(4 * 96, 0.1f);
  const auto make = [&w](quant::FormatSpec f, int64_t in = 96) {
    return error_of([&] { make_linear_cuda(f, w.data(), nullptr, 4, in, "enc.0.ffn.lin1.weight"); });
  };
  quant::FormatSpec f = precision("w8");
  EXPECT_THAT(make(f), AllOf(HasSubstr("enc.0.ffn.lin1.weight"), HasSubstr("'w8'"), HasSubstr("no CUDA kernel")));
  f = precision("int8");
  f.emulate = true;
  EXPECT_THAT(make(f), HasSubstr("fake quantization runs on the CPU only"));
  EXPECT_THAT(error_of([] { precision("fp64"); }), HasSubstr("unknown format 'fp64'"));
  f = precision("int4");
  f.group_size = 32;
  f.int4_int8_activations = true;
  EXPECT_THAT(make(f), HasSubstr("int4 with INT8 activations (a8) has no CUDA kernel"));
  f.int4_int8_activations = false;
  f.group_size = 48;
  EXPECT_THAT(make(f), HasSubstr("int4 group size 48; expected 32, 64 or 128"));
  f.group_size = 64;
  EXPECT_THAT(make(f), AllOf(HasSubstr("in_features 96 is not a multiple of the int4 group size 64")));
  EXPECT_THAT(make(precision("nf4")), HasSubstr("in_features 96 is not a multiple of the nf4 block size 64"));
  EXPECT_THAT(make(precision("fp16"), 0), HasSubstr("shape [4, 0]; expected positive dimensions"));
  for (const std::string& e : {make(precision("w8")), make(precision("nf4"))}) EXPECT_THAT(e, Not(HasSubstr("\n")));
}

TEST(CudaLinear, WithoutAGpuTheFactorySaysWhy) {
  const CudaDeviceStatus& s = cuda_device_status();
  if (s.usable) GTEST_SKIP() << "this machine has a usable GPU";
  const std::vector<float> w(8 * 128, 0.25f), b(8, 1.0f);
  for (const std::string& p : cuda_format_list()) {
    EXPECT_THAT(error_of([&] { make_linear_cuda(precision(p), w.data(), b.data(), 8, 128, "lm_head.weight"); }),
                AllOf(HasSubstr("tensor 'lm_head.weight'"),
                      HasSubstr(s.built ? "no usable GPU: " + s.reason : std::string("without the CUDA backend"))))
        << p;
  }
}

#if QJOULE_HAVE_CUDA
// The host preparation runs before the GPU is looked for, so its errors show here too.
TEST(CudaLinear, BadWeightsAreRejectedBeforeTheGpuIsNeeded) {
  std::vector<float> w(4 * 128, 0.5f);
  w[2 * 128 + 5] = std::numeric_limits<float>::quiet_NaN();
  for (const std::string p : {"fp32", "tf32", "bf16", "fp16", "int8", "fp8", "int4", "nf4", "mxfp4", "nvfp4"}) {
    EXPECT_THAT(
        error_of([&] { make_linear_cuda(precision(p), w.data(), nullptr, 4, 128, "enc.2.attn.q.weight"); }),
        AllOf(HasSubstr("enc.2.attn.q.weight"), ::testing::AnyOf(HasSubstr("[2, 5]"), HasSubstr("row 2 column 5"))))
        << p;
  }
  std::vector<float> big(4 * 64, 0.5f);
  big[7] = 70000.0f;
  EXPECT_THAT(error_of([&] { make_linear_cuda(precision("fp16"), big.data(), nullptr, 4, 64, "t.weight"); }),
              HasSubstr("t.weight"));
}
#endif

// ---- everywhere: host helpers -----------------------------------------------------------------------

TEST(CudaLinearHost, PanelRowsAndGemvVariants) {
  using namespace cuda_detail;
  EXPECT_EQ(weight_panel_rows(1024, 4096), 1024);   // 8 MiB of FP16: one panel
  EXPECT_EQ(weight_panel_rows(8192, 8192), 2048);   // 32 MiB / (2 · 8192)
  EXPECT_EQ(weight_panel_rows(1100, 16384), 1024);  // two panels: 1024 + 76 rows
  EXPECT_EQ(weight_panel_rows(4096, 1 << 20), 64);  // never fewer than 64 rows
  EXPECT_EQ(weight_panel_rows(10, 1 << 20), 10);
  for (int64_t out : {1, 63, 64, 1000, 5000, 100000})
    for (int64_t in : {32, 4096, 16384, 262144}) {
      const int64_t rows = weight_panel_rows(out, in);
      EXPECT_TRUE(rows == out || rows % 64 == 0) << out << " " << in;
      EXPECT_TRUE(rows * 2 * in <= kPanelBytes || rows == std::min<int64_t>(out, 64)) << out << " " << in;
    }
  const int expected[] = {1, 1, 2, 4, 4, 8, 8, 8, 8};
  for (int64_t m = 1; m <= kGemvMaxRows; ++m) EXPECT_EQ(gemv_rows_variant(m), expected[m]) << m;
  EXPECT_EQ(round_up(1, 16), 16);
  EXPECT_EQ(round_up(16, 16), 16);
  EXPECT_EQ(round_up(100, 16), 112);
}

// QJOULE_CUDA_GEMV4 picks the 4-bit GEMV: unset or "split" the default, "plain" the other, anything
// else one line naming the variable and what it takes.
TEST(CudaLinearHost, Gemv4VariableNamesTheKernel) {
  const char* before = std::getenv("QJOULE_CUDA_GEMV4");
  const std::string saved = before != nullptr ? before : "";
  unsetenv("QJOULE_CUDA_GEMV4");
  EXPECT_TRUE(cuda_detail::gemv4_split());
  setenv("QJOULE_CUDA_GEMV4", "split", 1);
  EXPECT_TRUE(cuda_detail::gemv4_split());
  setenv("QJOULE_CUDA_GEMV4", "plain", 1);
  EXPECT_FALSE(cuda_detail::gemv4_split());
  setenv("QJOULE_CUDA_GEMV4", "fast", 1);
  EXPECT_THAT(test::error_of([] { cuda_detail::gemv4_split(); }),
              HasSubstr("QJOULE_CUDA_GEMV4=fast: expected split or plain (unset: split)"));
  EXPECT_THAT(test::error_of([] { check_cuda_format(quant::parse_format_spec("int4"), "tensor 't'"); }),
              HasSubstr("QJOULE_CUDA_GEMV4=fast"));
  if (before != nullptr) {
    setenv("QJOULE_CUDA_GEMV4", saved.c_str(), 1);
  } else {
    unsetenv("QJOULE_CUDA_GEMV4");
  }
}

// The dense GEMV serves decode-sized products (m ≤ 4) of the formats it has, at widths its 16-byte
// loads cover; everything else runs cuBLASLt.
TEST(CudaLinearHost, DenseGemvTakesDecodeRowsOfFp32Fp16Bf16AndInt8) {
  using namespace cuda_detail;
  for (const GemmKind k : {GemmKind::f32, GemmKind::f16, GemmKind::bf16, GemmKind::s8}) {
    EXPECT_TRUE(dense_gemv_applies(k, 1, 2048));
    EXPECT_TRUE(dense_gemv_applies(k, kDenseGemvMaxRows, 5632));
    EXPECT_FALSE(dense_gemv_applies(k, kDenseGemvMaxRows + 1, 2048));
    EXPECT_FALSE(dense_gemv_applies(k, 0, 2048));
  }
  EXPECT_TRUE(dense_gemv_applies(GemmKind::f32, 1, 100));
  EXPECT_FALSE(dense_gemv_applies(GemmKind::f16, 1, 100));  // not a multiple of 8
  EXPECT_FALSE(dense_gemv_applies(GemmKind::s8, 1, 1032));  // not a multiple of 16
  EXPECT_FALSE(dense_gemv_applies(GemmKind::tf32, 1, 2048));
  EXPECT_FALSE(dense_gemv_applies(GemmKind::e4m3, 1, 2048));
}

#if QJOULE_HAVE_CUDA
TEST(CudaLinearHost, E4m3ConversionsFollowTheFormat) {
  using namespace cuda_detail;
  int finite = 0;
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    const float v = e4m3_to_fp32(code);
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << c;  // S.1111.111 is NaN; E4M3 has no infinities
      continue;
    }
    ++finite;
    EXPECT_EQ(fp32_to_e4m3(v), code) << c << " decodes to " << v;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_to_fp32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_fp32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(e4m3_to_fp32(0x38), 1.0f);
  EXPECT_EQ(fp32_to_e4m3(1.0625f), 0x38);  // halfway between 1 and 1.125: to even
  EXPECT_EQ(fp32_to_e4m3(1.1875f), 0x3A);  // halfway between 1.125 and 1.25: to even
  EXPECT_EQ(fp32_to_e4m3(1000.0f), 0x7E);  // saturates
  EXPECT_EQ(fp32_to_e4m3(-1000.0f), 0xFE);
  EXPECT_EQ(fp32_to_e4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(fp32_to_e4m3(0x1p-11f), 0x00);  // below half the smallest subnormal: to zero
}

TEST(CudaLinearHost, E4m3RowQuantizationScalesEachRowToItsMaximum) {
  using namespace cuda_detail;
  const std::vector<float> x = {0.5f, -2.0f, 1.0f, 0.0f, 0.0f, 0.0f, 3e-31f, 1e-3f, -1e-3f};
  std::vector<uint8_t> q(3 * 4, 0xAA);
  std::vector<float> scales(3);
  quantize_rows_e4m3(x.data(), 3, 3, 4, q.data(), scales.data());
  EXPECT_EQ(scales[0], 2.0f / 448.0f);
  EXPECT_EQ(q[1], 0xFE);  // -max → -448
  EXPECT_EQ(e4m3_to_fp32(q[0]), 112.0f);
  EXPECT_EQ(e4m3_to_fp32(q[2]), 224.0f);
  EXPECT_EQ(q[3], 0);          // padding column
  EXPECT_EQ(scales[1], 0.0f);  // all-zero row
  EXPECT_THAT(std::vector<uint8_t>(q.begin() + 4, q.begin() + 8), ::testing::Each(0));
  EXPECT_EQ(scales[2], 1e-3f / 448.0f);
  EXPECT_EQ(q[8], 0x00);  // 3e-31 · (448 / 1e-3) underflows
  EXPECT_EQ(q[9], 0x7E);
  EXPECT_EQ(q[10], 0xFE);
  EXPECT_EQ(q[11], 0x00);
  float inv = 1.0f, scale = 1.0f;
  e4m3_scales(1e-31f, inv, scale);  // below 1e-30: codes 0, scale 0
  EXPECT_EQ(inv, 0.0f);
  EXPECT_EQ(scale, 0.0f);
}
#endif

TEST(CudaGemmPeak, DatasheetFiguresForKnownGpusAndEstimatesOtherwise) {
  CudaGpuInfo h100{"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980, 50 << 20, int64_t{80} << 30};
  EXPECT_DOUBLE_EQ(dense_tensor_peak(h100, quant::Format::fp16).tops, 989.4);
  EXPECT_DOUBLE_EQ(dense_tensor_peak(h100, quant::Format::bf16).tops, 989.4);
  EXPECT_DOUBLE_EQ(dense_tensor_peak(h100, quant::Format::int8).tops, 1978.9);
  EXPECT_DOUBLE_EQ(dense_tensor_peak(h100, quant::Format::fp8).tops, 1978.9);
  EXPECT_THAT(dense_tensor_peak(h100, quant::Format::fp8).source, HasSubstr("datasheet: H100 SXM5"));
  CudaGpuInfo h200 = h100;
  h200.name = "NVIDIA H200";
  EXPECT_DOUBLE_EQ(dense_tensor_peak(h200, quant::Format::fp16).tops, 989.4);
  CudaGpuInfo pcie = h100;
  pcie.name = "NVIDIA H100 PCIe";
  EXPECT_DOUBLE_EQ(dense_tensor_peak(pcie, quant::Format::fp16).tops, 756.0);
  CudaGpuInfo a100{"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410, 40 << 20, int64_t{80} << 30};
  EXPECT_DOUBLE_EQ(dense_tensor_peak(a100, quant::Format::bf16).tops, 312.0);
  EXPECT_EQ(dense_tensor_peak(a100, quant::Format::fp8).tops, 0.0);
  EXPECT_THAT(dense_tensor_peak(a100, quant::Format::fp8).source, HasSubstr("no dense fp8"));
  CudaGpuInfo l4{"NVIDIA L4", 8, 9, 58, 2040, 48 << 20, int64_t{24} << 30};  // datasheet: 242 TFLOP/s FP8 dense
  EXPECT_NEAR(dense_tensor_peak(l4, quant::Format::fp8).tops, 242.3, 0.1);
  EXPECT_NEAR(dense_tensor_peak(l4, quant::Format::fp16).tops, 121.2, 0.1);
  EXPECT_THAT(dense_tensor_peak(l4, quant::Format::fp8).source, HasSubstr("estimate: 58 SMs x 2040 MHz"));
  CudaGpuInfo future{"NVIDIA Next", 12, 0, 100, 2000, 0, 0};
  EXPECT_EQ(dense_tensor_peak(future, quant::Format::fp16).tops, 0.0);
  EXPECT_THAT(dense_tensor_peak(future, quant::Format::fp16).source, HasSubstr("sm_120"));
}

TEST(CudaGemmPeak, MedianOfTimes) {
  EXPECT_EQ(median_of({}), 0.0);
  EXPECT_EQ(median_of({3.0f, 1.0f, 2.0f}), 2.0);
  EXPECT_EQ(median_of({4.0f, 1.0f, 3.0f, 2.0f}), 2.5);
}

// ---- on a GPU: each format against its CPU reference -----------------------------------------------

#if QJOULE_HAVE_CUDA

// QJOULE_REQUIRE_GPU, Shape, budget_scale, expect_within, run_layer: cuda_linear_checks.h.

// The product of x and W in double after rounding both through `round`.
template <class Round>
std::vector<float> rounded_product(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                                   const Shape& s, Round round) {
  std::vector<float> xr(x.size()), wr(w.size()), y(static_cast<std::size_t>(s.m * s.out));
  std::transform(x.begin(), x.end(), xr.begin(), round);
  std::transform(w.begin(), w.end(), wr.begin(), round);
  linear_f32_ref(xr.data(), s.m, wr.data(), bias, s.out, s.in, y.data());
  return y;
}

// The fp8 layer's computation on the host: the same codes and scales, products in double.
std::vector<float> fp8_reference(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                                 const Shape& s, std::vector<double>& scale) {
  float amax = 0.0f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  float inv = 0.0f, sw = 0.0f;
  cuda_detail::e4m3_scales(amax, inv, sw);
  std::vector<float> wd(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) wd[i] = cuda_detail::e4m3_to_fp32(cuda_detail::fp32_to_e4m3(w[i] * inv));
  std::vector<uint8_t> xq(x.size());
  std::vector<float> sx(static_cast<std::size_t>(s.m));
  cuda_detail::quantize_rows_e4m3(x.data(), s.m, s.in, s.in, xq.data(), sx.data());
  std::vector<float> y(static_cast<std::size_t>(s.m * s.out));
  scale.assign(y.size(), 0.0);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t o = 0; o < s.out; ++o) {
      double acc = 0.0, mag = 0.0;
      for (int64_t k = 0; k < s.in; ++k) {
        const double p = double(cuda_detail::e4m3_to_fp32(xq[static_cast<std::size_t>(i * s.in + k)])) *
                         wd[static_cast<std::size_t>(o * s.in + k)];
        acc += p;
        mag += std::fabs(p);
      }
      const double f = double(sx[static_cast<std::size_t>(i)]) * sw;
      const double b = bias != nullptr ? bias[o] : 0.0;
      y[static_cast<std::size_t>(i * s.out + o)] = static_cast<float>(acc * f + b);
      scale[static_cast<std::size_t>(i * s.out + o)] = mag * f + std::fabs(b);
    }
  return y;
}

double relative_rms(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    num += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

// m ≤ 4 with widths the 16-byte loads cover run qjoule's GEMV (fp32, fp16, bf16, int8): (1, 64, 256),
// (3, 77, 1040) (rows not a multiple of the block's 8), (1, 2560, 2048) (the fused q|k|v of a 1.1B
// Llama), (2, 300, 4608) (2¼ of the 2,048 columns the FP16 / BF16 / INT8 GEMVs stage at a time);
// (1, 50, 100) and (5, 33, 100) run cuBLASLt (100 is no multiple of 8; 5 rows > 4).
const std::vector<Shape> kDenseShapes = {{1, 64, 256}, {3, 77, 1040},  {1, 2560, 2048}, {2, 300, 4608},
                                         {1, 50, 100}, {7, 200, 1024}, {5, 33, 100},    {64, 1024, 4096}};

// The dense path a layer names: "qjoule:cuda:NAME_gemv,m>4:LT" where the GEMV covers the width.
std::string dense_path(const std::string& gemv, const std::string& lt, int64_t in) {
  const int per_load = gemv == "s8" ? 16 : gemv == "f32" ? 4 : 8;
  return in % per_load == 0 ? "qjoule:cuda:" + gemv + "_gemv,m>4:" + lt : lt;
}

TEST(CudaLinearGpu, DenseFormatsMatchTheirCpuReferences) {
  QJOULE_REQUIRE_GPU();
  const int cc = compute_capability();
  for (const Shape& s : kDenseShapes) {
    const auto x = test::random_vector(static_cast<std::size_t>(s.m * s.in), 31);
    const auto w = test::random_vector(static_cast<std::size_t>(s.out * s.in), 32, 0.05f);
    const auto bv = test::random_vector(static_cast<std::size_t>(s.out), 33);
    const float* bias = s.out % 2 == 0 ? bv.data() : nullptr;
    const auto scale = budget_scale(x, w, bias, s);
    std::vector<float> f32(static_cast<std::size_t>(s.m * s.out));
    linear_f32_ref(x.data(), s.m, w.data(), bias, s.out, s.in, f32.data());

    for (const std::string p : {"fp32", "tf32", "fp16", "bf16", "int8", "fp8"}) {
      if ((p == "tf32" || p == "bf16") && cc < 80) continue;
      if (p == "fp8" && cc < 89) continue;
      SCOPED_TRACE(describe(p, s));
      const auto layer = make_linear_cuda(precision(p), w.data(), bias, s.out, s.in, "t.weight");
      EXPECT_EQ(layer->format(), p);
      EXPECT_EQ(layer->in_features(), s.in);
      EXPECT_EQ(layer->out_features(), s.out);
      // "GEMV,m>4:LT" names the GEMV for m ≤ 4 and LT above; a path without one is every m's.
      const std::string path = layer->kernel_path();
      const auto split = path.find(",m>4:");
      EXPECT_EQ(layer->kernel_path_for(s.m), split == std::string::npos ? path
                                             : s.m <= 4                 ? path.substr(0, split)
                                                                        : path.substr(split + 5));
      const auto y = run_layer(*layer, x, s);
      const std::size_t bias_bytes = bias != nullptr ? static_cast<std::size_t>(s.out) * 4 : 0;
      const auto padded = [](int64_t v) { return static_cast<std::size_t>(cuda_detail::round_up(v, 16)); };
      if (p == "fp32" || p == "tf32") {
        EXPECT_EQ(layer->kernel_path(),
                  p == "fp32" ? dense_path("f32", "cublaslt:f32", s.in) : "cublaslt:tf32:tensor_op");
        EXPECT_EQ(layer->bytes_held(), static_cast<std::size_t>(s.out * s.in) * 4 + bias_bytes);
        expect_within(y, f32, scale, p == "fp32" ? 3e-5 : 3e-3, p);
      } else if (p == "fp16") {
        EXPECT_EQ(layer->kernel_path(), dense_path("f16", "cublaslt:f16:tensor_op", s.in));
        EXPECT_EQ(layer->bytes_held(), static_cast<std::size_t>(s.out * s.in) * 2 + bias_bytes);
        const auto ref = rounded_product(x, w, bias, s,
                                         [](float v) { return quant::fp16_bits_to_fp32(quant::fp32_to_fp16_bits(v)); });
        expect_within(y, ref, scale, 1e-4, p);
      } else if (p == "bf16") {
        EXPECT_EQ(layer->kernel_path(), dense_path("bf16", "cublaslt:bf16:tensor_op", s.in));
        EXPECT_EQ(layer->bytes_held(), static_cast<std::size_t>(s.out * s.in) * 2 + bias_bytes);
        std::vector<float> ref(y.size());
        linear_bf16_ref(x.data(), s.m, w.data(), bias, s.out, s.in, ref.data());
        expect_within(y, ref, scale, 1e-4, p);
      } else if (p == "int8") {
        EXPECT_EQ(layer->kernel_path(), dense_path("s8", "cublaslt:s8:tensor_op", s.in));
        EXPECT_EQ(layer->bytes_held(), padded(s.out) * padded(s.in) + padded(s.out) * 4 + bias_bytes);
        std::vector<float> ref(y.size());
        linear_int8_w8a8_ref(x.data(), s.m, w.data(), bias, s.out, s.in, 127, ref.data());
        float max_ref = 0.0f;
        for (float v : ref) max_ref = std::max(max_ref, std::fabs(v));
        for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-6f * max_ref) << "int8 at " << i;
        EXPECT_LT(relative_rms(y, f32), 0.02);  // 8-bit weights and activations vs FP32
      } else {
        EXPECT_EQ(layer->kernel_path(), "cublaslt:e4m3:tensor_op");
        EXPECT_EQ(layer->bytes_held(), padded(s.out) * padded(s.in) + padded(s.out) * 4 + bias_bytes);
        std::vector<double> fp8_scale;
        const auto ref = fp8_reference(x, w, bias, s, fp8_scale);
        expect_within(y, ref, fp8_scale, 2e-3, p);
        EXPECT_LT(relative_rms(y, f32), 0.1);  // E4M3: 3 mantissa bits on both operands
      }
    }
  }
}

TEST(CudaLinearGpu, ForwardDeviceOnAStreamEqualsTheHostForward) {
  QJOULE_REQUIRE_GPU();
  const Shape s{3, 96, 512};
  const auto x = test::random_vector(static_cast<std::size_t>(s.m * s.in), 61);
  const auto w = test::random_vector(static_cast<std::size_t>(s.out * s.in), 62, 0.05f);
  const auto bv = test::random_vector(static_cast<std::size_t>(s.out), 63);
  float* dx = nullptr;
  float* dy = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), static_cast<std::size_t>(s.m * s.out) * sizeof(float)),
            cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  for (const std::string p : {"fp16", "int8", "int4", "nf4"}) {
    const auto layer = make_linear_cuda(precision(p), w.data(), bv.data(), s.out, s.in, "t.weight");
    const auto host = run_layer(*layer, x, s);
    layer->forward_device(dx, s.m, dy, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<float> device(host.size());
    ASSERT_EQ(cudaMemcpy(device.data(), dy, device.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    // The same plan and kernels run on both paths; allow only last-bit differences, in case cuBLASLt's
    // reduction order depends on the stream.
    float max_host = 0.0f;
    for (float v : host) max_host = std::max(max_host, std::fabs(v));
    for (std::size_t i = 0; i < host.size(); ++i) ASSERT_NEAR(device[i], host[i], 1e-6f * max_host) << p << " at " << i;
  }
  cudaStreamDestroy(stream);
  cudaFree(dx);
  cudaFree(dy);
}

TEST(CudaLinearGpu, NonFiniteActivationsGiveNanRowsOnTheQuantizedPaths) {
  QJOULE_REQUIRE_GPU();
  const Shape s{2, 32, 64};
  auto x = test::random_vector(static_cast<std::size_t>(s.m * s.in), 71);
  x[static_cast<std::size_t>(s.in + 9)] = std::numeric_limits<float>::infinity();
  const auto w = test::random_vector(static_cast<std::size_t>(s.out * s.in), 72, 0.05f);
  std::vector<std::string> formats = {"int8"};
  if (compute_capability() >= 89) formats.push_back("fp8");
  for (const std::string& p : formats) {
    const auto layer = make_linear_cuda(precision(p), w.data(), nullptr, s.out, s.in, "t.weight");
    const auto y = run_layer(*layer, x, s);
    for (int64_t o = 0; o < s.out; ++o) {
      EXPECT_TRUE(std::isfinite(y[static_cast<std::size_t>(o)])) << p << " row 0, " << o;
      EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(s.out + o)])) << p << " row 1, " << o;
    }
  }
}

TEST(CudaLinearGpu, Fp8BelowSm89AndTf32Bf16BelowSm80AreOneLineErrors) {
  QJOULE_REQUIRE_GPU();
  const int cc = compute_capability();
  if (cc >= 89) GTEST_SKIP() << "GPU 0 is sm_" << cc << ": fp8, tf32 and bf16 all run there";
  const std::vector<float> w(16 * 64, 0.5f);
  EXPECT_THAT(error_of([&] { make_linear_cuda(precision("fp8"), w.data(), nullptr, 16, 64, "t.weight"); }),
              AllOf(HasSubstr("t.weight"), HasSubstr("needs compute capability 8.9 or newer")));
  if (cc < 80) {
    EXPECT_THAT(error_of([&] { make_linear_cuda(precision("bf16"), w.data(), nullptr, 16, 64, "t.weight"); }),
                HasSubstr("needs compute capability 8.0 or newer"));
  }
}

TEST(CudaLinearGpu, AGpuThatDoesNotExistIsAOneLineError) {
  QJOULE_REQUIRE_GPU();
  const std::vector<float> w(16 * 64, 0.5f);
  EXPECT_THAT(error_of([&] { make_linear_cuda(precision("fp16"), w.data(), nullptr, 16, 64, "t.weight", 99); }),
              HasSubstr("GPU 99 does not exist"));
}

#endif  // QJOULE_HAVE_CUDA

}  // namespace
}  // namespace qjoule::kernels

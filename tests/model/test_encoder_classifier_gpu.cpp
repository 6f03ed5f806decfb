// EncoderClassifier on the CUDA GraphOps backend (the same graph, every weight on one GPU) against the
// same graph on the CPU, format by format, on the tiny-bert fixture (BERT: token types, tanh pooler) and a small synthetic DistilBERT
// (ReLU pre_classifier; hidden 128 so that int4 g128 and nf4 apply). Without a GPU (or without the
// CUDA backend) the GPU tests skip with cuda_device_status()'s reason; the format resolution and the
// constructor's one-line refusal run everywhere.
//
// Budgets: max |Δlogit| over every logit ≤ budget · max |reference logit|, the reference being the
// CPU model in the same format, or CPU FP32 for the CUDA-only formats:
//   fp32        1e-4   cuBLASLt FP32 vs oneDNN FP32: summation order only
//   tf32        2e-2   vs CPU fp32: operands rounded to TF32 (10-bit mantissa) by the tensor cores
//   fp16        1e-2   vs CPU fp16 (FP16 weights, FP32 activations): the GPU also rounds activations to FP16
//   bf16        3e-2   vs CPU bf16 (both round weights and activations to BF16): accumulation order, and
//                      activations whose BF16 rounding flips after an upstream FP32 difference
//   int8        3e-2   vs CPU int8 W8A8 (same per-channel / per-token codes): codes that flip after an
//                      upstream FP32 difference
//   fp8         0.25   vs CPU fp32: E4M3 weights (per tensor) and activations (per token), 3-bit mantissa
//   int4, nf4   1e-2   vs the CPU format: the same dequantized weights; the panel path (> 8 rows) rounds
//                      weights and activations to FP16, the GEMV path (≤ 8 rows) sums in FP32
// and the prediction (argmax) agrees wherever the reference's top-two margin exceeds twice the budget.
#include "qjoule/model/cuda_linear_factory.h"
#include "qjoule/model/device_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"
#include "test_paths.h"

namespace qjoule::model {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

EncoderParams tiny_bert() {
  const auto dir = test::fixtures_dir() / "tiny-bert";
  const auto checkpoint = io::Checkpoint::open(dir);
  return load_encoder_params(checkpoint, load_encoder_config(dir, checkpoint));
}

EncoderParams small_distilbert() {
  SyntheticEncoderSpec s;
  s.name = "small";
  s.vocab_size = 1100;
  s.hidden_size = 128;
  s.num_layers = 2;
  s.num_heads = 4;
  s.intermediate_size = 256;
  s.max_positions = 64;
  s.num_labels = 3;
  return synthetic_encoder_params(s);
}

quant::LayerPolicy policy(const std::string& precision, const std::string& layer_precision = "") {
  quant::LayerPolicyOptions o;
  o.precision = precision;
  o.layer_precision = layer_precision;
  return quant::LayerPolicy::parse(o);
}

// The graph on GPU `device`, every Linear in the policy's format.
EncoderClassifier gpu_model(const EncoderParams& p, const std::string& precision, int device = 0) {
  return EncoderClassifier(p, cuda_linear_factory(cuda_linear_formats(policy(precision)), device), ActivationDtype::f32,
                           make_cuda_graph_ops(device));
}

// ---- everywhere -------------------------------------------------------------------------------------

TEST(EncoderClassifierGpuFormats, BlockLinearsGetThePolicyFormatAndTheHeadStaysFp32) {
  const EncoderParams p = small_distilbert();
  const auto formats = cuda_linear_formats(policy("int8", "*.layer.0.*=fp8,*.ffn.lin2=tf32"));
  EXPECT_EQ(formats(p.layers[0].q, true).format, quant::Format::fp8);
  EXPECT_EQ(formats(p.layers[1].q, true).format, quant::Format::int8);
  EXPECT_EQ(formats(p.layers[1].ffn_out, true).format, quant::Format::tf32);
  EXPECT_EQ(formats(p.head_dense, false).format, quant::Format::fp32);
  EXPECT_EQ(formats(p.classifier, false).format, quant::Format::fp32);
  const auto int4 = cuda_linear_formats(policy("int4:g64:asym"))(p.layers[0].o, true);
  EXPECT_EQ(int4.group_size, 64);
  EXPECT_TRUE(int4.int4_asymmetric);
}

TEST(EncoderClassifierGpuFormats, FormatsWithoutACudaKernelAreOneLineErrors) {
  const EncoderParams p = small_distilbert();
  EXPECT_THAT(error_of([&] { cuda_linear_formats(policy("w8"))(p.layers[0].q, true); }),
              AllOf(HasSubstr("tensor 'distilbert.transformer.layer.0.attention.q_lin'"), HasSubstr("no CUDA kernel")));
  EXPECT_THAT(error_of([&] { cuda_linear_formats(policy("int8:emulate"))(p.layers[0].q, true); }),
              HasSubstr("fake quantization runs on the CPU only"));
  EXPECT_THAT(error_of([&] { cuda_linear_formats(policy("int4:a8"))(p.layers[0].q, true); }),
              HasSubstr("int4 with INT8 activations (a8) has no CUDA kernel"));
  EXPECT_THAT(error_of([] { quant::parse_format_spec("fp8:g64"); }), HasSubstr("fp8 takes no options"));
  EXPECT_THAT(error_of([] { quant::parse_format_spec("fp4"); }), HasSubstr("unknown format 'fp4'"));
}

TEST(EncoderClassifierGpu, WithoutAGpuTheBackendSaysWhy) {
  const auto& s = kernels::cuda_device_status();
  if (s.usable) GTEST_SKIP() << "this machine has a usable GPU";
  const std::string e = error_of([] { gpu_model(tiny_bert(), "fp32"); });
  EXPECT_THAT(e, AllOf(HasSubstr("GPU 0: no usable GPU: "), HasSubstr(s.reason)));
  EXPECT_EQ(e.find('\n'), std::string::npos);
}

// One decision per device: SmoothQuant's factors are refused on a GPU before any GPU is asked for, and
// without a usable GPU the backend says why.
TEST(DeviceBackend, SmoothQuantOnAGpuAndAMissingGpuAreOneLine) {
  const SmoothingFactors smoothing{{"bert.encoder.layer.0.attention.self.query", {1.0f}}};
  EXPECT_EQ(error_of([&] { device_backend(0, policy("int8"), smoothing); }),
            "SmoothQuant runs on the CPU only (the GPU int8 layers quantize activations per token without smoothing)");
  EXPECT_TRUE(device_backend(-1, policy("int8")).ops == nullptr) << "the CPU backend is every model's default";
  const auto& s = kernels::cuda_device_status();
  if (s.usable) return;
  EXPECT_EQ(error_of([] { device_backend(0, policy("int8")); }), "GPU 0: no usable GPU: " + s.reason);
}

// ---- on a GPU ---------------------------------------------------------------------------------------

#define REQUIRE_GPU()                                                       \
  do {                                                                      \
    const auto& status = kernels::cuda_device_status();                     \
    if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason; \
  } while (0)

struct Inputs {
  int64_t batch, seq;
  std::vector<int32_t> ids, mask;
};

// Pseudo-random ids in [1, vocab); sequence 1 (when there is one) padded after 5 tokens.
Inputs inputs(int64_t vocab, int64_t batch, int64_t seq, unsigned seed) {
  Inputs in{batch, seq, std::vector<int32_t>(batch * seq), std::vector<int32_t>(batch * seq, 1)};
  std::uint64_t state = seed;
  for (auto& id : in.ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>(1 + (state >> 33) % static_cast<std::uint64_t>(vocab - 1));
  }
  if (batch > 1)
    for (int64_t t = 5; t < seq; ++t) {
      in.mask[seq + t] = 0;
      in.ids[seq + t] = 0;
    }
  return in;
}

std::vector<float> cpu_logits(const EncoderParams& p, const std::string& precision, const Inputs& in) {
  const EncoderClassifier m(p, quantized_linear_factory(policy(precision), {}));
  std::vector<float> logits(static_cast<std::size_t>(in.batch * p.config.num_labels));
  m.forward(in.ids.data(), in.mask.data(), in.batch, in.seq, logits.data());
  return logits;
}

struct FormatCase {
  std::string name;
  std::string gpu;      // the GPU model's --precision
  std::string cpu;      // the CPU reference's
  double budget;        // relative to max |reference logit|
  bool needs_width_64;  // int4 g128 / nf4: in_features a multiple of 64 or 128 (not tiny-bert's 32)
};
void PrintTo(const FormatCase& c, std::ostream* os) { *os << c.name; }

class EncoderClassifierGpuVsCpu : public ::testing::TestWithParam<FormatCase> {};

// The compute capability a format needs (make_linear_cuda refuses it below).
int needs_sm(const std::string& precision) {
  return precision == "fp8" ? 89 : precision == "tf32" || precision == "bf16" ? 80 : 75;
}

TEST_P(EncoderClassifierGpuVsCpu, LogitsWithinBudget) {
  REQUIRE_GPU();
  const FormatCase& c = GetParam();
  const int sm = kernels::cuda_device_status().compute_capabilities.at(0);
  if (sm < needs_sm(c.gpu)) GTEST_SKIP() << c.gpu << " needs sm_" << needs_sm(c.gpu) << "; GPU 0 is sm_" << sm;
  for (const bool bert : {true, false}) {
    if (bert && c.needs_width_64) continue;
    const EncoderParams p = bert ? tiny_bert() : small_distilbert();
    const EncoderClassifier gpu = gpu_model(p, c.gpu);
    // > 8 rows (4-bit panel path) with padding, and ≤ 8 rows (4-bit GEMV path).
    for (const Inputs& in : {inputs(p.config.vocab_size, 3, 12, 7), inputs(p.config.vocab_size, 1, 6, 9)}) {
      const auto ref = cpu_logits(p, c.cpu, in);
      std::vector<float> got(ref.size(), std::nanf(""));
      gpu.forward(in.ids.data(), in.mask.data(), in.batch, in.seq, got.data());
      double scale = 0.0, worst = 0.0;
      for (float v : ref) scale = std::max(scale, double(std::fabs(v)));
      for (std::size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - ref[i])));
      const std::string where = std::string(bert ? "tiny-bert" : "small distilbert") + " batch " +
                                std::to_string(in.batch) + " × " + std::to_string(in.seq);
      EXPECT_LE(worst, c.budget * scale + 1e-6) << where << ": max |Δlogit| " << worst << ", max |logit| " << scale;
      const auto labels = static_cast<std::size_t>(p.config.num_labels);
      for (int64_t b = 0; b < in.batch; ++b) {
        const auto row = ref.begin() + static_cast<long>(b * labels);
        std::vector<float> sorted(row, row + static_cast<long>(labels));
        std::sort(sorted.rbegin(), sorted.rend());
        if (labels > 1 && sorted[0] - sorted[1] <= 2.0 * c.budget * scale) continue;
        const auto g = got.begin() + static_cast<long>(b * labels);
        EXPECT_EQ(std::max_element(g, g + static_cast<long>(labels)) - g,
                  std::max_element(row, row + static_cast<long>(labels)) - row)
            << where << ", sequence " << b;
      }
      // The event-timed forward computes the same logits.
      std::vector<float> timed(ref.size());
      EXPECT_GT(gpu.forward_timed(in.ids.data(), in.mask.data(), in.batch, in.seq, timed.data()), 0.0);
      EXPECT_EQ(timed, got) << where;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, EncoderClassifierGpuVsCpu,
    ::testing::Values(FormatCase{"fp32", "fp32", "fp32", 1e-4, false}, FormatCase{"tf32", "tf32", "fp32", 2e-2, false},
                      FormatCase{"fp16", "fp16", "fp16", 1e-2, false}, FormatCase{"bf16", "bf16", "bf16", 3e-2, false},
                      FormatCase{"int8", "int8", "int8", 3e-2, false}, FormatCase{"fp8", "fp8", "fp32", 0.25, false},
                      FormatCase{"int4_g32", "int4:g32", "int4:g32", 1e-2, false},
                      FormatCase{"int4_g32_asym", "int4:g32:asym", "int4:g32:asym", 1e-2, false},
                      FormatCase{"int4_g128", "int4", "int4", 1e-2, true}, FormatCase{"nf4", "nf4", "nf4", 1e-2, true},
                      FormatCase{"nf4_dq", "nf4:dq", "nf4:dq", 1e-2, true}),
    [](const ::testing::TestParamInfo<FormatCase>& case_info) { return case_info.param.name; });

TEST(EncoderClassifierGpu, KernelPathsSizesAndChecks) {
  REQUIRE_GPU();
  const EncoderParams p = tiny_bert();
  const EncoderClassifier fp32 = gpu_model(p, "fp32");
  EXPECT_EQ(fp32.device(), (Device{Device::Kind::cuda, 0}));
  // Q, K, V fused per block (2 blocks): 2 fused + 2 × 3 others + the 2 head Linears.
  EXPECT_EQ(fp32.kernel_path_counts(),
            (std::map<std::string, int>{{"fp32 qjoule:cuda:f32_gemv,m>4:cublaslt:f32", 8},
                                        {"fp32 qjoule:cuda:f32_gemv,m>4:cublaslt:f32 [q+k+v fused]", 2}}));
  EXPECT_EQ(fp32.fp32_bytes(), fp32.bytes_held());
  EXPECT_THAT(fp32.nongemm_path(), AllOf(HasSubstr("attention"), HasSubstr("gelu_erf"), HasSubstr("tanh")));
  // The CPU model's input checks and messages.
  std::vector<float> logits(3);
  const std::vector<int32_t> bad_ids{2, 60, 3}, mask{1, 1, 1};
  EXPECT_THAT(error_of([&] { fp32.forward(bad_ids.data(), mask.data(), 1, 3, logits.data()); }),
              HasSubstr("token id 60 at batch row 0, position 1 is outside the vocabulary [0, 53)"));
  std::vector<int32_t> long_ids(41, 2), long_mask(41, 1);
  EXPECT_THAT(error_of([&] { fp32.forward(long_ids.data(), long_mask.data(), 1, 41, logits.data()); }),
              HasSubstr("sequence length 41 exceeds max_position_embeddings 40"));
  if (kernels::cuda_device_status().compute_capabilities.at(0) < 89) return;  // no fp8 below sm_89
  // fp8 is not fused (one scale per tensor).
  const EncoderClassifier fp8 = gpu_model(p, "fp8");
  EXPECT_EQ(fp8.kernel_path_counts(), (std::map<std::string, int>{{"fp32 qjoule:cuda:f32_gemv,m>4:cublaslt:f32", 2},
                                                                  {"fp8 cublaslt:e4m3:tensor_op", 12}}));
  EXPECT_LT(fp8.bytes_held(), fp32.bytes_held());
}

TEST(EncoderClassifierGpu, AGpuThatDoesNotExistIsOneLine) {
  REQUIRE_GPU();
  EXPECT_THAT(error_of([] { gpu_model(tiny_bert(), "fp32", 99); }), HasSubstr("GPU 99 does not exist"));
}

// A CPU Linear handed to the GPU graph is one line naming the layer, before anything runs.
TEST(EncoderClassifierGpu, ACpuLinearOnTheGpuBackendIsOneLine) {
  REQUIRE_GPU();
  const EncoderClassifier m(tiny_bert(), fp32_linear_factory(), ActivationDtype::f32, make_cuda_graph_ops(0));
  std::vector<float> logits(3);
  const std::vector<int32_t> ids{2, 5, 3}, mask{1, 1, 1};
  EXPECT_THAT(error_of([&] { m.forward(ids.data(), mask.data(), 1, 3, logits.data()); }),
              HasSubstr("Linear built for the CPU, handed to GPU 0"));
}

}  // namespace
}  // namespace qjoule::model

// GPTQ calibration of a decoder (model/calibration/decoder_calibration.h) on the tiny fixtures:
//  * DecoderLM::embed + forward_layer, layer after layer, then the final norm and head by hand, give
//    forward()'s logits (the calibration runs the model's own operations);
//  * the calibrated model runs the kernels round-to-nearest runs, fused the same way, and its output
//    is closer to FP32's (mean KL over held-out sequences below 0.8x RTN's);
//  * calibration is deterministic, and its bad inputs are one line.
#include <gmock/gmock.h>

#include <cmath>
#include <random>
#include <span>

#include "calibration_test_util.h"
#include "decoder_fixtures.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/model/cuda_linear_factory.h"
#include "qjoule/quant/quantize_int4.h"
#include "qjoule/model/decoder_loading.h"
#include "qjoule/model/calibration/decoder_calibration.h"

namespace {

using namespace qjoule;
using test::mean_kl;
using test::policy;
using test::random_sequences;
using test::text_like_sequences;
using ::testing::HasSubstr;

// The final norm and the head on the last hidden states, by hand from the checkpoint's tensors.
std::vector<float> head_by_hand(const std::filesystem::path& dir, const model::DecoderConfig& c,
                                const std::vector<float>& x, int64_t n) {
  const auto ck = io::Checkpoint::open(dir);
  const bool gpt2 = ck.contains("ln_f.weight");
  auto gamma = ck.to_f32(gpt2 ? "ln_f.weight" : "model.norm.weight");
  if (c.norm_offset_one)  // Gemma: applied as 1 + w
    for (float& g : gamma) g += 1.0f;
  const auto beta = gpt2 ? ck.to_f32("ln_f.bias") : std::vector<float>{};
  const std::string head = gpt2                            ? "wte.weight"
                           : ck.contains("lm_head.weight") ? "lm_head.weight"
                                                           : "model.embed_tokens.weight";
  const auto w = ck.to_f32(head);
  const int64_t h = c.hidden_size;
  std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x.data() + t * h;
    double mean = 0.0, sq = 0.0;
    for (int64_t j = 0; j < h; ++j) mean += row[j];
    mean = gpt2 ? mean / double(h) : 0.0;
    for (int64_t j = 0; j < h; ++j) sq += (row[j] - mean) * (row[j] - mean);
    const double inv = 1.0 / std::sqrt(sq / double(h) + double(c.norm_eps));
    std::vector<double> normed(static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j)
      normed[size_t(j)] = (row[j] - mean) * inv * gamma[size_t(j)] + (gpt2 ? beta[size_t(j)] : 0.0f);
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      double s = 0.0;
      for (int64_t j = 0; j < h; ++j) s += normed[size_t(j)] * w[size_t(v * h + j)];
      logits[size_t(t * c.vocab_size + v)] = float(s);
    }
  }
  return logits;
}

TEST(DecoderLayerAtATime, EmbedAndEveryLayerThenTheHeadGiveForwardsLogits) {
  for (const auto& name : test::decoder_fixture_names()) {
    const auto dir = test::decoder_fixture(name);
    const auto m = model::load_decoder_lm(dir);
    const auto& c = m.config();
    const auto ids = random_sequences(1, 24, int32_t(c.vocab_size), 3).front();
    const int64_t n = int64_t(ids.size());
    std::vector<float> x(size_t(n * c.hidden_size)), logits(size_t(n * c.vocab_size));
    m.embed(ids.data(), n, x.data());
    for (int64_t l = 0; l < c.num_layers; ++l) m.forward_layer(l, x.data(), n);
    auto cache = m.make_cache(n);
    m.forward(ids.data(), n, cache, logits.data());
    const auto by_hand = head_by_hand(dir, c, x, n);
    double max_diff = 0.0, max_abs = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
      max_diff = std::max(max_diff, double(std::fabs(logits[i] - by_hand[i])));
      max_abs = std::max(max_abs, double(std::fabs(logits[i])));
    }
    EXPECT_LE(max_diff, 1e-4 * std::max(1.0, max_abs)) << name;
  }
}

TEST(GptqCalibration, TheCalibratedModelRunsRtnsKernelsAndIsCloserToFp32) {
  const auto dir = test::decoder_fixture("tiny-llama");
  const auto fp32 = model::load_decoder_lm(dir);
  const int32_t vocab = int32_t(fp32.config().vocab_size);
  const auto calib = text_like_sequences(32, 64, vocab, 11);
  const auto held_out = text_like_sequences(8, 64, vocab, 12);
  for (const std::string rtn_spec : {"int4:g=32:sym", "int4:g=128:asym"}) {
    for (const std::string option : {":gptq", ":gptq:actorder", ":gptq bf16 products"}) {
      const bool bf16 = option.ends_with("bf16 products");
      const auto gptq_policy = policy(rtn_spec + (bf16 ? ":gptq" : option));
      model::CalibrationOptions options;
      options.bf16_products = bf16;  // the recording pass's products in BF16: still closer than RTN
      auto calibrated =
          std::make_shared<model::CalibratedInt4>(model::calibrate_decoder(dir, gptq_policy, calib, options));
      EXPECT_EQ(calibrated->bf16_products, bf16);
      EXPECT_EQ(calibrated->codes.size(), 14u) << "2 layers × 7 block Linears";
      EXPECT_EQ(calibrated->sequences, 32);
      EXPECT_EQ(calibrated->tokens_per_sequence, 64);
      const auto gptq = model::load_decoder(dir, -1, gptq_policy, calibrated);
      const auto rtn = model::load_decoder(dir, -1, policy(rtn_spec));
      EXPECT_EQ(gptq.model.kernel_path_counts(), rtn.model.kernel_path_counts()) << rtn_spec << option;
      EXPECT_EQ(gptq.model.bytes_held(), rtn.model.bytes_held());
      const double kl_gptq = mean_kl(fp32, gptq.model, held_out), kl_rtn = mean_kl(fp32, rtn.model, held_out);
      RecordProperty(rtn_spec + option, std::to_string(kl_gptq / kl_rtn));
      EXPECT_LT(kl_gptq, 0.8 * kl_rtn) << rtn_spec << option << ": " << kl_gptq << " vs RTN " << kl_rtn;
    }
  }
}

TEST(GptqCalibration, IsDeterministic) {
  const auto dir = test::decoder_fixture("tiny-qwen2");
  const auto calib = random_sequences(8, 32, 256, 5);
  const auto p = policy("int4:g=64:gptq");
  const auto a = model::calibrate_decoder(dir, p, calib, {});
  const auto b = model::calibrate_decoder(dir, p, calib, {});
  ASSERT_EQ(a.codes.size(), b.codes.size());
  for (const auto& [name, codes] : a.codes) {
    const auto& other = b.codes.at(name);
    std::visit(
        [&](const auto& m) {
          const auto& n = std::get<std::decay_t<decltype(m)>>(other);
          ASSERT_EQ(m.bytes(), n.bytes());
          EXPECT_EQ(std::memcmp(m.blocks.data(), n.blocks.data(), m.bytes()), 0) << name;
        },
        codes);
  }
}

// tiny-llama with layer 0's down projection scaled by 1e38 (as F32, kept FP32 by the policy): its outputs
// overflow to ±Inf, and layer 1's normalized inputs are NaN. Calibration stops at the first Linear they
// reach, naming it.
TEST(GptqCalibration, NonFiniteInputsStopAtTheLinearTheyReach) {
  const auto dir =
      test::rewritten_fixture("tiny-llama", "gptq_overflow", [](const std::string& name, std::vector<float>& v) {
        if (name == "model.layers.0.mlp.down_proj.weight")
          for (float& x : v) x *= 1e38f;
      });
  const auto calib = text_like_sequences(2, 16, 256, 1);
  for (const std::string method : {"gptq", "awq"}) {
    quant::LayerPolicyOptions o;
    o.precision = "int4:g=32:" + method;
    o.layer_precision = "model.layers.0.mlp.down_proj=fp32";
    EXPECT_THAT([&] { model::calibrate_decoder(dir, quant::LayerPolicy::parse(o), calib, {}); },
                ::testing::ThrowsMessage<Error>(
                    ::testing::AllOf(HasSubstr("model.layers.1.self_attn.q_proj: calibration input NaN at [0, "),
                                     HasSubstr("expected finite values"), ::testing::Not(HasSubstr("\n")))))
        << method;
  }
}

TEST(GptqCalibration, BadInputsAreOneLine) {
  EXPECT_THAT([] { model::calibration_windows(std::vector<int32_t>(100, 1), 4, 32, "--calib c.txt"); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "--calib c.txt: 100 tokens, too few for 4 calibration sequences of 32 tokens (128 needed)")));
  EXPECT_EQ(model::calibration_windows(std::vector<int32_t>(130, 1), 4, 32, "x").size(), 4u);
  const auto dir = test::decoder_fixture("tiny-llama");
  EXPECT_THAT([&] { model::calibrate_decoder(dir, policy("int4:gptq"), {}, {}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("no calibration sequences")));
  EXPECT_THAT(
      [&] {
        model::calibrate_decoder(dir, policy("int4:gptq"), {{1, 2, 100000}}, {});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("token id 100000 at position 2 is outside the vocabulary")));
}

// a8 has no CUDA kernel: calibrated a8 codes asked for a GPU are one line, before the GPU is looked for.
TEST(CalibratedOnGpu, A8CodesAreOneLine) {
  const std::vector<float> w(4 * 64, 0.5f);
  auto codes = quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(w.data(), 4, 64, "t");
  EXPECT_THAT([&] { model::cuda_int4_codes_linear(0)(std::move(codes), nullptr, "model.layers.0.mlp.up_proj", true); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("model.layers.0.mlp.up_proj: int4 with INT8 activations (a8) has no CUDA kernel")));
}

// Calibrated codes on a GPU: the calibration runs on the CPU, its codes in the CUDA int4 layers
// (make_linear_cuda_int4_packed, the kernels round-to-nearest's int4 runs there), every calibrated Linear on
// them, and the logits within int4's GPU-vs-CPU budget of the CPU model of the same codes (1e-2 of max |CPU
// logit|, as test_decoder_gpu.cpp). Skips without a GPU.
TEST(CalibratedOnGpu, TheCodesRunInTheCudaInt4LayersWithinInt4sBudgetOfTheCpu) {
  const kernels::CudaDeviceStatus& status = kernels::cuda_device_status();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason;
  const auto dir = test::decoder_fixture("tiny-llama");
  const auto calib = text_like_sequences(8, 32, 256, 21);
  const std::vector<int32_t> prompt = {5, 17, 3, 99, 42, 7, 64, 1};
  const auto n = static_cast<int64_t>(prompt.size());
  for (const std::string spec : {"int4:g=32:gptq", "int4:g=64:asym:gptq:actorder", "int4:g=128:awq"}) {
    SCOPED_TRACE(spec);
    const auto calibrated = model::calibrate_decoder(dir, policy(spec), calib, {});
    const auto cpu = model::load_decoder(dir, -1, policy(spec), std::make_shared<model::CalibratedInt4>(calibrated));
    const auto gpu = model::load_decoder(dir, 0, policy(spec), std::make_shared<model::CalibratedInt4>(calibrated));
    ASSERT_TRUE(gpu.on_gpu);
    int int4_linears = 0;
    for (const auto& [path, count] : gpu.model.kernel_path_counts())
      if (path.find("qjoule:cuda:int4_gemv") != std::string::npos) int4_linears += count;
    EXPECT_GE(int4_linears, 4) << "2 layers x fused q|k|v, o, gate|up, down";
    const auto vocab = static_cast<std::size_t>(cpu.model.config().vocab_size);
    std::vector<float> a(vocab), b(vocab);
    auto ca = cpu.model.make_cache(n), cb = gpu.model.make_cache(n);
    cpu.model.forward(prompt.data(), n, ca, a.data(), n - 1);
    gpu.model.forward(prompt.data(), n, cb, b.data(), n - 1);
    float max_ref = 0.0f, max_diff = 0.0f;
    for (std::size_t i = 0; i < vocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(a[i]));
      max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
    }
    EXPECT_LE(max_diff, 1e-2f * max_ref);
  }
}

}  // namespace

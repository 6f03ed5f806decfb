// GraphOps (qjoule/model/graph_ops.h): tensors that know their device, the checks every backend makes,
// and the encoder graph written once against the operations: run through a recording backend, it
// calls nothing but GraphOps and gives the CPU backend's logits bit for bit.
#include "qjoule/model/graph_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/encoder_classifier.h"
#include "random_data.h"
#include "recording_ops.h"
#include "test_paths.h"

namespace qjoule::model {
namespace {

using test::error_of;
using ::testing::HasSubstr;

TEST(Tensor, SlicesShareTheMemoryAndStayInBounds) {
  const auto ops = make_cpu_graph_ops();
  const Tensor t = ops->upload({1, 2, 3, 4, 5}, "t");
  EXPECT_EQ(t.device(), (Device{Device::Kind::cpu, 0}));
  const Tensor s = t.slice(1, 3);
  EXPECT_EQ(s.size(), 3);
  EXPECT_EQ(s.f32(), t.f32() + 1);
  EXPECT_EQ(s.bytes(), 12u);
  EXPECT_THAT(error_of([&] { t.slice(3, 3); }), HasSubstr("slice [3, 6) of a tensor of 5 elements: out of range"));
  EXPECT_THAT(error_of([&] { t.i32(); }), HasSubstr("tensor of 5 f32 elements read as i32"));
  EXPECT_EQ(to_string(Device{Device::Kind::cuda, 2}), "cuda:2");
}

TEST(GraphOpsCpu, ATensorFromAnotherDeviceIsOneLineNamingTheOperation) {
  const auto ops = make_cpu_graph_ops();
  float fake[8] = {};
  const Tensor on_gpu(Device{Device::Kind::cuda, 0}, DType::f32, fake, 8, nullptr);
  const Tensor gamma = ops->upload(std::vector<float>(4, 1.0f), "gamma"), beta = ops->upload({0, 0, 0, 0}, "beta");
  EXPECT_EQ(error_of([&] { ops->add_layer_norm(on_gpu, {}, 2, 4, gamma, beta, 1e-5f); }),
            "LayerNorm: the input lives on cuda:0, the operation runs on cpu");
  const Tensor small = ops->empty(DType::f32, 6, "x");
  EXPECT_EQ(error_of([&] { ops->add_layer_norm(small, {}, 2, 4, gamma, beta, 1e-5f); }),
            "LayerNorm: the input holds 6 elements, the operation reads 8");
  const Tensor ids = ops->empty(DType::i32, 2, "ids");
  EXPECT_EQ(error_of([&] { ops->activation(Activation::relu, ids, 2); }),
            "activation: the input holds i32 elements, expected f32");
}

TEST(GraphOpsCpu, OperationsAreTheCpuKernels) {
  const auto ops = make_cpu_graph_ops();
  // Embedding sum: word[ids] + position[i % seq] + token type 0.
  const Tensor word = ops->upload({0, 0, 1, 1, 2, 2}, "word"), position = ops->upload({10, 20, 30, 40}, "pos"),
               tt0 = ops->upload({100, 200}, "tt0");
  const Tensor ids = ops->empty(DType::i32, 4, "ids"), out = ops->empty(DType::f32, 8, "out");
  const int32_t host_ids[4] = {2, 1, 0, 2};
  ops->copy_in(host_ids, ids);
  ops->embedding_sum(ids, word, position, tt0, 2, 0, 2, out);
  std::vector<float> got(8);
  ops->copy_out(out, got.data());
  EXPECT_EQ(got, (std::vector<float>{112, 222, 131, 241, 110, 220, 132, 242}));
  // Rows copied with strides: the [CLS] gather.
  const Tensor cls = ops->empty(DType::f32, 4, "cls");
  ops->copy_rows(cls, 2, out, 4, 2, 2);
  std::vector<float> rows(4);
  ops->copy_out(cls, rows.data());
  EXPECT_EQ(rows, (std::vector<float>{112, 222, 110, 220}));
  // Activations as the kernels compute them.
  std::vector<float> values{-2.0f, -0.5f, 0.0f, 0.7f, 3.0f};
  for (const auto kind : {Activation::gelu_erf, Activation::gelu_tanh, Activation::tanh, Activation::relu}) {
    const Tensor x = ops->upload(values, "x");
    ops->activation(kind, x, 5);
    std::vector<float> want = values;
    if (kind == Activation::gelu_erf) kernels::gelu_erf_f32(want.data(), 5);
    if (kind == Activation::tanh) kernels::tanh_f32(want.data(), 5);
    if (kind == Activation::relu) kernels::relu_f32(want.data(), 5);
    std::vector<float> have(5);
    ops->copy_out(x, have.data());
    if (kind == Activation::gelu_tanh) {
      EXPECT_NEAR(have[4], 2.9963627f, 1e-5f);
    } else {
      EXPECT_EQ(have, want);
    }
  }
  EXPECT_THAT(ops->nongemm_path(), HasSubstr("qjoule:cpu:"));
}

EncoderParams tiny_bert() {
  const auto dir = test::fixtures_dir() / "tiny-bert";
  const auto checkpoint = io::Checkpoint::open(dir);
  return load_encoder_params(checkpoint, load_encoder_config(dir, checkpoint));
}

TEST(EncoderGraph, RunsThroughGraphOpsOnlyAndMatchesTheCpuBackend) {
  const EncoderParams p = tiny_bert();
  const EncoderClassifier cpu(p, fp32_linear_factory());
  auto recording = std::make_shared<RecordingOps>();
  const EncoderClassifier recorded(p, fp32_linear_factory(), ActivationDtype::f32, recording);
  const std::vector<int32_t> ids{2, 7, 9, 3, 2, 5, 3, 0}, mask{1, 1, 1, 1, 1, 1, 1, 0};
  std::vector<float> a(6), b(6);
  cpu.forward(ids.data(), mask.data(), 2, 4, a.data());
  recording->calls.clear();
  recorded.forward(ids.data(), mask.data(), 2, 4, b.data());
  EXPECT_EQ(a, b);
  // tiny-bert: 2 blocks with Q, K, V fused, so 4 Linears each, and the 2 head Linears; the embedding
  // LayerNorm and 2 per block; the FFN activation per block and the head's tanh.
  EXPECT_EQ(recording->calls, (std::map<std::string, int>{{"empty", 2},
                                                          {"host_output", 1},
                                                          {"copy_in", 2},
                                                          {"embedding_sum", 1},
                                                          {"add_layer_norm", 5},
                                                          {"linear", 10},
                                                          {"attention", 2},
                                                          {"activation", 3},
                                                          {"copy_rows", 1},
                                                          {"copy_out", 1}}));
  EXPECT_EQ(recorded.device_name(), "recording");
  EXPECT_EQ(cpu.bytes_held(), recorded.bytes_held());
  // The timed forward gives the same logits.
  std::vector<float> c(6);
  EXPECT_GE(cpu.forward_timed(ids.data(), mask.data(), 2, 4, c.data()), 0.0);
  EXPECT_EQ(a, c);
}

// Q, K and V built apart (what the GPU factory does for fp8 and nf4:dq): three aligned thirds of the
// same tensor, the same logits as the fused Linear up to summation order.
TEST(EncoderGraph, QkvBuiltApartGiveTheFusedLogits) {
  const EncoderParams p = tiny_bert();
  const LinearFactory fp32 = fp32_linear_factory();
  const LinearFactory apart = [fp32](const LinearParams& lp, bool in_block) -> std::unique_ptr<kernels::Linear> {
    return lp.fused_from.empty() ? fp32(lp, in_block) : nullptr;
  };
  const EncoderClassifier fused(p, fp32);
  auto recording = std::make_shared<RecordingOps>();
  const EncoderClassifier separate(p, apart, ActivationDtype::f32, recording);
  EXPECT_EQ(separate.linear_reports().size(), 2u * 6 + 2);
  const std::vector<int32_t> ids{2, 7, 9, 3, 2, 5, 3, 0, 4}, mask{1, 1, 1, 1, 1, 1, 1, 0, 0};
  std::vector<float> a(9), b(9);
  fused.forward(ids.data(), mask.data(), 3, 3, a.data());
  recording->calls.clear();
  separate.forward(ids.data(), mask.data(), 3, 3, b.data());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * std::max(1.0f, std::fabs(a[i]))) << i;
  EXPECT_EQ(recording->calls["linear"], 2 * 6 + 2);
}

TEST(EncoderGraph, Bf16ActivationsAreRoundedThroughTheBackend) {
  const EncoderParams p = tiny_bert();
  auto recording = std::make_shared<RecordingOps>();
  const EncoderClassifier m(p, fp32_linear_factory(), ActivationDtype::bf16, recording);
  const std::vector<int32_t> ids{2, 7, 9, 3}, mask{1, 1, 1, 1};
  std::vector<float> logits(3);
  recording->calls.clear();
  m.forward(ids.data(), mask.data(), 1, 4, logits.data());
  // After the embedding LayerNorm; per block after Q/K/V, attention, O, LayerNorm, FFN in, activation,
  // FFN out, LayerNorm (8); after the head's dense and its activation.
  EXPECT_EQ(recording->calls["round_to_bf16"], 1 + 2 * 8 + 2);
  EXPECT_THAT(m.nongemm_path(), HasSubstr("round_to_bf16"));
}

// The decoder graph through the recording backend: the same logits as the CPU backend, prefill then
// decode over the KV cache, and only GraphOps calls (RoPE for Llama, none for GPT-2's learned positions).
TEST(DecoderGraph, RunsThroughGraphOpsOnlyAndMatchesTheCpuBackend) {
  for (const std::string name : {"tiny-llama", "tiny-gpt2"}) {
    const auto dir = test::fixtures_dir() / "decoders" / name;
    const DecoderLM cpu = load_decoder_lm(dir);
    auto recording = std::make_shared<RecordingOps>();
    const DecoderLM recorded = load_decoder_lm(dir, fp32_linear_factory(), nullptr, recording);
    const auto vocab = static_cast<std::size_t>(cpu.config().vocab_size);
    const std::vector<int32_t> prompt{5, 17, 42, 9};
    std::vector<float> a(2 * vocab), b(2 * vocab);
    auto cache_a = cpu.make_cache(8);
    auto cache_b = recorded.make_cache(8);
    recording->calls.clear();
    cpu.forward(prompt.data(), 4, cache_a, a.data(), 2);
    recorded.forward(prompt.data(), 4, cache_b, b.data(), 2);
    EXPECT_EQ(a, b) << name;
    const int32_t next = 3;
    cpu.forward(&next, 1, cache_a, a.data(), 0);
    recorded.forward(&next, 1, cache_b, b.data(), 0);
    EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + static_cast<long>(vocab)),
              std::vector<float>(b.begin(), b.begin() + static_cast<long>(vocab)))
        << name << ": the decode step over the cache";
    EXPECT_EQ(cache_b.size(), 5);
    const int layers = static_cast<int>(cpu.config().num_layers);
    const bool llama = name == "tiny-llama";
    EXPECT_EQ(recording->calls["causal_attention"], 2 * layers) << name;
    // Llama's Q, K, V and gate, up are fused Linears: one RoPE over q | k (rope_store_kv, whose CPU
    // default runs rope, then store_kv), one SwiGLU over gate | up.
    EXPECT_EQ(recording->calls["rope"], llama ? 2 * layers : 0) << name;
    EXPECT_EQ(recording->calls["silu_mul_rows"], llama ? 2 * layers : 0) << name;
    EXPECT_EQ(recording->calls["silu_mul"], 0) << name;
    EXPECT_EQ(recording->calls["linear"], 2 * (4 * layers + 1)) << name;
    // RMSNorm: the first layer's input norm alone; every later norm adds the residual first.
    EXPECT_EQ(recording->calls["rms_norm"], llama ? 2 : 0) << name;
    EXPECT_EQ(recording->calls["add_rms_norm"], llama ? 2 * 2 * layers : 0) << name;
    EXPECT_EQ(recording->calls["add_layer_norm"], llama ? 0 : 2 * (2 * layers + 1)) << name;
    EXPECT_EQ(recording->calls["add"], llama ? 0 : 2 * 2 * layers) << name;
    EXPECT_EQ(recording->calls["store_kv"], 2 * layers) << name;
    // GPT-2's LayerNorms' input copies (not the final, in place).
    EXPECT_EQ(recording->calls["copy_rows"], llama ? 0 : 2 * 2 * layers) << name;
    EXPECT_EQ(recording->calls["host_output"], 2);
    EXPECT_THAT(
        recorded.nongemm_path(),
        HasSubstr(llama ? "embedding_bf16, rms_norm, add_rms_norm, rope_store_kv, causal_attention, silu_mul_rows"
                        : "embedding_sum, add, add_layer_norm, store_kv, causal_attention, gelu_tanh"));
  }
}

// A recorded decode step (decoder_step_graph.cpp) against the plain one: the first step runs plainly,
// the second records, every later one replays the recording with its position read from the device
// (here the CPU backend's position source); logits equal bit for bit over every step.
TEST(DecoderGraph, RecordedDecodeStepsEqualThePlainOnes) {
  for (const std::string name : {"tiny-llama", "tiny-gpt2"}) {
    const auto dir = test::fixtures_dir() / "decoders" / name;
    const DecoderLM plain = load_decoder_lm(dir);
    auto recording = std::make_shared<RecordingOps>();
    recording->record = true;
    DecoderLM recorded = load_decoder_lm(dir, fp32_linear_factory(), nullptr, recording);
    const auto vocab = static_cast<std::size_t>(plain.config().vocab_size);
    const std::vector<int32_t> prompt{5, 17, 42, 9};
    std::vector<float> a(vocab), b(vocab);
    auto cache_a = plain.make_cache(16);
    auto cache_b = recorded.make_cache(16);
    plain.forward(prompt.data(), 4, cache_a, a.data(), 3);
    recorded.forward(prompt.data(), 4, cache_b, b.data(), 3);
    int32_t token = 3;
    for (int step = 0; step < 6; ++step) {
      plain.forward(&token, 1, cache_a, a.data(), 0);
      recorded.forward(&token, 1, cache_b, b.data(), 0);
      ASSERT_EQ(a, b) << name << " step " << step;
      token = static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
    }
    EXPECT_EQ(cache_b.size(), 10);
    EXPECT_EQ(recording->captures, 1) << name;
    EXPECT_EQ(recording->replays, 5) << name;  // steps 2..6
    EXPECT_THAT(recorded.decode_step_path(), HasSubstr("one recording a token: 7 kernels")) << name;
    // Back to the prompt and decoding again: the same recording serves the earlier positions.
    cache_a.truncate(4);
    cache_b.truncate(4);
    plain.forward(&token, 1, cache_a, a.data(), 0);
    recorded.forward(&token, 1, cache_b, b.data(), 0);
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(recording->captures, 1) << name;
    // A new cache records again (after one plain step).
    auto cache_c = recorded.make_cache(12);
    recorded.forward(prompt.data(), 4, cache_c, b.data(), 3);
    recorded.forward(&token, 1, cache_c, b.data(), 0);
    recorded.forward(&token, 1, cache_c, b.data(), 0);
    EXPECT_EQ(recording->captures, 2) << name;
    // Off: kernel by kernel, and said so.
    recorded.set_decode_graph(false);
    recorded.forward(&token, 1, cache_c, b.data(), 0);
    EXPECT_THAT(recorded.decode_step_path(), HasSubstr("kernel by kernel: the decode graph is off")) << name;
    // On again: the recording replays, and the path says so again.
    recorded.set_decode_graph(true);
    recorded.forward(&token, 1, cache_c, b.data(), 0);
    EXPECT_THAT(recorded.decode_step_path(), HasSubstr("one recording a token: 7 kernels")) << name;
    EXPECT_EQ(recording->captures, 2) << name;
  }
}

// QJOULE_DECODE_GRAPH: 0 turns the recording off for the models loaded after it, 1 (or unset) on;
// anything else is one line naming the variable and what it takes.
TEST(DecoderGraph, DecodeGraphVariableIsZeroOrOne) {
  const auto dir = test::fixtures_dir() / "decoders" / "tiny-llama";
  const char* before = std::getenv("QJOULE_DECODE_GRAPH");
  const std::string saved = before != nullptr ? before : "";
  setenv("QJOULE_DECODE_GRAPH", "off", 1);
  EXPECT_THAT(test::error_of([&] { load_decoder_lm(dir); }),
              HasSubstr("QJOULE_DECODE_GRAPH=off: expected 0 (every decode step kernel by kernel) or 1"));
  setenv("QJOULE_DECODE_GRAPH", "0", 1);
  auto recording = std::make_shared<RecordingOps>();
  recording->record = true;
  const DecoderLM m = load_decoder_lm(dir, fp32_linear_factory(), nullptr, recording);
  if (before != nullptr) {
    setenv("QJOULE_DECODE_GRAPH", saved.c_str(), 1);
  } else {
    unsetenv("QJOULE_DECODE_GRAPH");
  }
  const std::vector<int32_t> prompt{5, 17};
  std::vector<float> logits(static_cast<std::size_t>(m.config().vocab_size));
  auto cache = m.make_cache(8);
  m.forward(prompt.data(), 2, cache, logits.data(), 1);
  for (int32_t token : {3, 4, 5}) m.forward(&token, 1, cache, logits.data(), 0);
  EXPECT_EQ(recording->captures, 0);
  EXPECT_THAT(m.decode_step_path(), HasSubstr("the decode graph is off (QJOULE_DECODE_GRAPH=0"));
}

// A recording that fails turns the graph off for the model, says why, and the step runs kernel by kernel
// with the same logits.
TEST(DecoderGraph, AFailedRecordingFallsBackKernelByKernelAndSaysWhy) {
  const auto dir = test::fixtures_dir() / "decoders" / "tiny-llama";
  const DecoderLM plain = load_decoder_lm(dir);
  auto recording = std::make_shared<RecordingOps>();
  recording->record = true;
  recording->refuse_capture = true;
  const DecoderLM recorded = load_decoder_lm(dir, fp32_linear_factory(), nullptr, recording);
  const auto vocab = static_cast<std::size_t>(plain.config().vocab_size);
  const std::vector<int32_t> prompt{5, 17, 42, 9};
  std::vector<float> a(vocab), b(vocab);
  auto cache_a = plain.make_cache(12), cache_b = recorded.make_cache(12);
  plain.forward(prompt.data(), 4, cache_a, a.data(), 3);
  recorded.forward(prompt.data(), 4, cache_b, b.data(), 3);
  for (int32_t token : {3, 8, 1, 4}) {
    plain.forward(&token, 1, cache_a, a.data(), 0);
    recorded.forward(&token, 1, cache_b, b.data(), 0);
    ASSERT_EQ(a, b) << token;
  }
  EXPECT_EQ(recording->captures, 1);  // tried once, then off
  EXPECT_EQ(cache_b.size(), 8);
  EXPECT_THAT(recorded.decode_step_path(),
              HasSubstr("kernel by kernel: no CUDA graph: this backend cannot record here"));
  EXPECT_TRUE(recording->position_source().empty());
}

// A position source on the CPU backend: the operations read the position from it, not their argument.
TEST(GraphOps, OperationsReadTheirPositionFromThePositionSource) {
  const auto ops = make_cpu_graph_ops();
  const Tensor position = ops->empty(DType::i32, 1, "position");
  *position.i32() = 3;
  const Tensor k = ops->upload({1, 2}, "k"), v = ops->upload({3, 4}, "v");
  const Tensor kc = ops->upload(std::vector<float>(10, 0.0f), "kc"),
               vc = ops->upload(std::vector<float>(10, 0.0f), "vc");
  ops->set_position_source(position);
  ops->store_kv(k, v, 2, kc, vc, 2, /*past=*/0, 1, 2);
  ops->set_position_source({});
  EXPECT_EQ(std::vector<float>(kc.f32(), kc.f32() + 10), (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 2, 0, 0}));
  EXPECT_EQ(std::vector<float>(vc.f32(), vc.f32() + 10), (std::vector<float>{0, 0, 0, 0, 0, 0, 3, 4, 0, 0}));
  EXPECT_THAT(test::error_of([&] { ops->set_position_source(k); }), HasSubstr("the position source: the position"));
}

// add_rms_norm is the residual add, then the RMSNorm, bit for bit; silu_mul_rows is silu_mul per row.
TEST(GraphOps, FusedNormAndSwigluEqualTheirParts) {
  const auto ops = make_cpu_graph_ops();
  const int64_t rows = 3, cols = 37;
  const auto xv = test::random_vector(rows * cols, 1), rv = test::random_vector(rows * cols, 2),
             gv = test::random_vector(cols, 3);
  const Tensor x1 = ops->upload(xv, "x"), r1 = ops->upload(rv, "r"), g = ops->upload(gv, "g");
  const Tensor x2 = ops->upload(xv, "x"), r2 = ops->upload(rv, "r"), out = ops->empty(DType::f32, rows * cols, "o");
  ops->add_rms_norm(x1, r1, rows, cols, g, 1e-5f, r1);  // out = the residual
  ops->add(x2, r2, rows * cols);
  ops->rms_norm(x2, rows, cols, g, 1e-5f, out);
  EXPECT_EQ(std::vector<float>(x1.f32(), x1.f32() + rows * cols), std::vector<float>(x2.f32(), x2.f32() + rows * cols));
  EXPECT_EQ(std::vector<float>(r1.f32(), r1.f32() + rows * cols),
            std::vector<float>(out.f32(), out.f32() + rows * cols));
  const auto guv = test::random_vector(rows * 2 * cols, 4);
  const Tensor gu = ops->upload(guv, "gu"), act = ops->empty(DType::f32, rows * cols, "act");
  ops->silu_mul_rows(gu, rows, cols, act);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> gate(guv.begin() + r * 2 * cols, guv.begin() + r * 2 * cols + cols);
    const std::vector<float> up(guv.begin() + r * 2 * cols + cols, guv.begin() + (r + 1) * 2 * cols);
    kernels::silu_mul_f32(gate.data(), up.data(), cols);
    EXPECT_EQ(std::vector<float>(act.f32() + r * cols, act.f32() + (r + 1) * cols), gate) << r;
  }
  EXPECT_THAT(test::error_of([&] { ops->silu_mul_rows(gu, rows + 1, cols, act); }), HasSubstr("SwiGLU: gate|up"));
  EXPECT_THAT(test::error_of([&] { ops->add_rms_norm(x1, r1, rows + 1, cols, g, 1e-5f, out); }),
              HasSubstr("RMSNorm: the input holds 111 elements, the operation reads 148"));
  const Tensor kv = ops->upload({1, 2}, "kv"), cache = ops->upload(std::vector<float>(6, 0.0f), "cache");
  EXPECT_THAT(test::error_of([&] { ops->store_kv(kv, kv, 2, cache, cache, 2, /*past=*/3, 1, 2); }),
              HasSubstr("KV cache store: the key cache holds 6 elements, the operation reads 8"));
}

}  // namespace
}  // namespace qjoule::model

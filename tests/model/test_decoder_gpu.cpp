// DecoderLM on the CUDA backend, decode steps through the recorded CUDA graph against the same model
// kernel by kernel (set_decode_graph(false)) and against the CPU model in the same format, on the three
// decoder fixtures (Llama with fused q|k|v and gate|up, Qwen2 with q/k/v biases, GPT-2 with learned
// positions and LayerNorm), every CUDA format. Without a GPU it skips with cuda_device_status()'s reason.
//
// What must hold:
//   graph vs kernel by kernel   the same kernels on the same positions: logits equal bit for bit at every
//                               step, so the greedy tokens too, for 48 steps;
//   GPU vs CPU                  the first decode step's logits within the budgets of
//                               test_encoder_classifier_gpu.cpp (fp32 1e-4, fp16 1e-2, bf16 3e-2, int8
//                               3e-2, int4 / nf4 1e-2 of max |CPU logit|);
//   the recording               one graph a token, at most 12 kernels a layer (issue 40);
//   forward_batch               each sequence of a batch (multiple-choice scoring) within the GPU-vs-CPU
//                               budget of the CPU model's own forward of that sequence;
//   a mixture of experts        kernel by kernel (the host picks the experts), within the GPU-vs-CPU budget.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/model/cuda_linear_factory.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/graph_ops.h"
#include "qjoule/model/quantization_plan.h"
#include "test_paths.h"

namespace qjoule::model {
namespace {

using ::testing::HasSubstr;

quant::LayerPolicy policy(const std::string& precision) {
  quant::LayerPolicyOptions o;
  o.precision = precision;
  return quant::LayerPolicy::parse(o);
}

double budget(const std::string& p) {
  if (p == "fp32") return 1e-4;
  if (p == "bf16" || p == "int8") return 3e-2;
  return 1e-2;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// GPU vs CPU: max |want − got| within `rel` of max |want| (the budgets above).
void expect_within_budget(const std::vector<float>& want, const std::vector<float>& got, double rel,
                          const std::string& what) {
  float max_ref = 0.0f, max_diff = 0.0f;
  for (std::size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(want[i]));
    max_diff = std::max(max_diff, std::fabs(want[i] - got[i]));
  }
  EXPECT_LE(max_diff, rel * max_ref) << what;
}

// Prefill, then `steps` greedy decode steps; the logits of every decode step.
std::vector<std::vector<float>> greedy(const DecoderLM& m, const std::vector<int32_t>& prompt, int steps) {
  const auto vocab = static_cast<std::size_t>(m.config().vocab_size);
  auto cache = m.make_cache(static_cast<int64_t>(prompt.size()) + steps);
  std::vector<float> logits(vocab);
  const auto n = static_cast<int64_t>(prompt.size());
  m.forward(prompt.data(), n, cache, logits.data(), n - 1);
  std::vector<std::vector<float>> out;
  int32_t token = argmax(logits);
  for (int s = 0; s < steps; ++s) {
    m.forward(&token, 1, cache, logits.data(), 0);
    out.push_back(logits);
    token = argmax(logits);
  }
  return out;
}

TEST(DecoderGpu, GraphDecodeEqualsKernelByKernelAndTheCpuInEveryFormat) {
  const auto& status = kernels::cuda_device_status();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason;
  const std::vector<int32_t> prompt{5, 17, 42, 9, 3, 11, 7, 2};
  const int steps = 48;
  for (const std::string& name : qjoule::test::decoder_fixture_names()) {
    if (qjoule::test::moe_fixture(name)) continue;  // AMixtureOfExpertsRunsKernelByKernelWithinTheCpusBudget
    const auto dir = test::fixtures_dir() / "decoders" / name;
    const bool narrow = name != "tiny-llama";  // hidden 64: int4 groups of 64 at most
    for (const std::string p :
         {"fp32", "fp16", "bf16", "int8", narrow ? "int4:g64" : "int4", "int4:g32:asym", "nf4", "nf4:dq"}) {
      SCOPED_TRACE(name + " " + p);
      const auto load_gpu = [&] {
        return load_decoder_lm(dir, cuda_linear_factory(cuda_linear_formats(policy(p)), 0), nullptr,
                               make_cuda_graph_ops(0));
      };
      const DecoderLM graph = load_gpu();
      DecoderLM plain = load_gpu();
      plain.set_decode_graph(false);
      const auto a = greedy(graph, prompt, steps);
      const auto b = greedy(plain, prompt, steps);
      for (int s = 0; s < steps; ++s) ASSERT_EQ(a[s], b[s]) << "decode step " << s;
      // One graph a token, at most 12 kernels a layer where q | k | v and gate | up fuse (nf4:dq's
      // absmax groups would straddle them: its parts run apart, 15 kernels a layer).
      const std::string path = graph.decode_step_path();
      EXPECT_THAT(path, HasSubstr("one CUDA graph a token"));
      // "…: N kernels (…": the graph's kernel count (std::regex would do, but GCC 12's sanitizer builds
      // warn inside it).
      const auto at = path.find(" kernels (");
      const auto colon = path.rfind(": ", at);
      ASSERT_TRUE(at != std::string::npos && colon != std::string::npos) << path;
      const int graph_kernels = std::stoi(path.substr(colon + 2, at - colon - 2));
      const int layers = static_cast<int>(graph.config().num_layers);
      const int outside = 4;  // embeddings, the final norm (GPT-2: add + LayerNorm), lm_head
      EXPECT_LE(graph_kernels, (p == "nf4:dq" ? 15 : 12) * layers + outside) << path;
      EXPECT_THAT(plain.decode_step_path(), HasSubstr("kernel by kernel"));

      const DecoderLM cpu = load_decoder_lm(dir, quantized_linear_factory(policy(p)));
      expect_within_budget(greedy(cpu, prompt, 1)[0], a[0], budget(p), "GPU vs CPU, first decode step");
    }
  }
}

TEST(DecoderGpu, BatchedForwardGivesEachSequenceTheCpusLogits) {
  const auto& status = kernels::cuda_device_status();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason;
  for (const std::string& name : qjoule::test::decoder_fixture_names()) {
    if (qjoule::test::moe_fixture(name)) continue;  // AMixtureOfExpertsRunsKernelByKernelWithinTheCpusBudget
    const auto dir = test::fixtures_dir() / "decoders" / name;
    for (const std::string p : {"fp32", "int4:g32:asym"}) {
      SCOPED_TRACE(name + " " + p);
      const DecoderLM gpu =
          load_decoder_lm(dir, cuda_linear_factory(cuda_linear_formats(policy(p)), 0), nullptr, make_cuda_graph_ops(0));
      const DecoderLM cpu = load_decoder_lm(dir, quantized_linear_factory(policy(p)));
      const int64_t v = gpu.config().vocab_size;
      // A 6-token prefill (last logits) and 3 tokens after 4 cached, batched on the GPU, each alone on the CPU.
      const std::vector<int32_t> a{5, 17, 42, 9, 3, 11}, b{7, 2, 8, 1, 4, 6, 10};
      auto ga = gpu.make_cache(8), gb = gpu.make_cache(8), ca = cpu.make_cache(8), cb = cpu.make_cache(8);
      const auto row = static_cast<std::size_t>(v);
      std::vector<float> prefix(row), got_a(row), got_b(3 * row), want_a(row), want_b(3 * row);
      gpu.forward(b.data(), 4, gb, prefix.data(), 3);
      cpu.forward(b.data(), 4, cb, prefix.data(), 3);
      const DecoderSequence batch[] = {{a.data(), 6, &ga, got_a.data(), 5}, {b.data() + 4, 3, &gb, got_b.data(), 0}};
      gpu.forward_batch(batch);
      cpu.forward(a.data(), 6, ca, want_a.data(), 5);
      cpu.forward(b.data() + 4, 3, cb, want_b.data(), 0);
      expect_within_budget(want_a, got_a, budget(p), "the 6-token prefill, batched");
      expect_within_budget(want_b, got_b, budget(p), "3 tokens after 4 cached, batched");
      EXPECT_EQ(ga.size(), 6);
      EXPECT_EQ(gb.size(), 7);
    }
  }
}

// A mixture of experts on the GPU: the router's logits come back to the host at each mixture layer, which picks
// the experts (moe_routing.h) that then run on the GPU, so a decode step runs kernel by kernel and says why. The
// first decode step's logits are within the format's budget of the CPU model's. The fixtures' expert widths (16,
// 24, 32) are whole blocks of no 4-bit CUDA format: the formats here are the dense ones.
TEST(DecoderGpu, AMixtureOfExpertsRunsKernelByKernelWithinTheCpusBudget) {
  const auto& status = kernels::cuda_device_status();
  if (!status.usable) GTEST_SKIP() << "no usable GPU: " << status.reason;
  const std::vector<int32_t> prompt{5, 17, 42, 9, 3, 11, 7, 2};
  for (const std::string& name : qjoule::test::decoder_fixture_names()) {
    if (!qjoule::test::moe_fixture(name)) continue;
    const auto dir = test::fixtures_dir() / "decoders" / name;
    for (const std::string p : {"fp32", "fp16", "bf16", "int8"}) {
      SCOPED_TRACE(name + " " + p);
      const DecoderLM gpu =
          load_decoder_lm(dir, cuda_linear_factory(cuda_linear_formats(policy(p)), 0), nullptr, make_cuda_graph_ops(0));
      const auto g = greedy(gpu, prompt, 2);
      EXPECT_THAT(gpu.decode_step_path(), HasSubstr("kernel by kernel: a mixture's router chooses"));
      const DecoderLM cpu = load_decoder_lm(dir, quantized_linear_factory(policy(p)));
      expect_within_budget(greedy(cpu, prompt, 1)[0], g[0], budget(p), "GPU vs CPU, first decode step");
    }
  }
}

}  // namespace
}  // namespace qjoule::model

// A mixture-of-experts decoder through the recording backend: a prefill runs each expert at most once (over the
// rows of the tokens routed to it), a decode step runs its top-k experts only, and every expert output is weighted
// in by add_scaled; the logits equal the CPU backend's bit for bit.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "qjoule/model/decoder_lm.h"
#include "recording_ops.h"

namespace qjoule::model {
namespace {

TEST(MoeGraph, APrefillReadsEachExpertOnceAndADecodeStepItsTopK) {
  for (const std::string name : {"tiny-mixtral", "tiny-qwen3-moe", "tiny-olmoe"}) {
    SCOPED_TRACE(name);
    const auto dir = test::decoder_fixture(name);
    const auto ref = test::read_decoder_reference(name);
    const auto n = static_cast<int64_t>(ref.ids.size());
    auto recording = std::make_shared<RecordingOps>();
    const DecoderLM recorded = load_decoder_lm(dir, fp32_linear_factory(), nullptr, recording);
    const DecoderLM cpu = load_decoder_lm(dir);
    const auto& c = cpu.config();
    const int64_t k = c.moe.experts_per_token, sparse = test::moe_layers(c);
    // The path names the experts' SwiGLU and the routing.
    EXPECT_NE(cpu.nongemm_path().find(fmt::format(
                  "silu_mul_rows (mixture: router fp32, top-{} of {} experts, add_scaled)", k, c.moe.num_experts)),
              std::string::npos)
        << cpu.nongemm_path();

    std::vector<float> a(static_cast<std::size_t>(n * ref.vocab)), b(a.size());
    auto ca = cpu.make_cache(), cb = recorded.make_cache();
    cpu.forward(ref.ids.data(), n, ca, a.data());
    recording->linear_calls.clear();
    recording->calls.clear();
    recorded.forward(ref.ids.data(), n, cb, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "bit for bit";
    int expert_calls = 0;
    for (const auto& [linear, calls] : recording->linear_calls) {
      if (linear.find(".experts.") == std::string::npos) continue;
      EXPECT_EQ(calls, 1) << linear << ": each expert reads its weights once in a prefill";
      expert_calls += calls;
    }
    EXPECT_GT(expert_calls, 0);
    EXPECT_EQ(recording->calls["add_scaled"], sparse * n * k) << "each token's k experts weighted in";

    // One decode step: its top-k experts in each sparse layer (gate | up fused, and down), nothing else.
    const int32_t next = 7;
    recording->linear_calls.clear();
    recorded.forward(&next, 1, cb, b.data());
    cpu.forward(&next, 1, ca, a.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<std::size_t>(ref.vocab) * sizeof(float)), 0);
    expert_calls = 0;
    for (const auto& [linear, calls] : recording->linear_calls)
      if (linear.find(".experts.") != std::string::npos) expert_calls += calls;
    EXPECT_EQ(expert_calls, sparse * k * 2);
  }
}

}  // namespace
}  // namespace qjoule::model

// The fixtures first checked against qjoule's own PyTorch re-implementation (tiny-llama, tiny-qwen2,
// tiny-gpt2, and trained-llama, a small Llama trained on WikiText-2) against Hugging Face transformers'
// own modeling code (tools/make_transformers_reference.py: transformers 5.24.0, torch 2.15.0): qjoule's FP32
// logits within 1e-4 of transformers' (trained-llama over 64 tokens of WikiText-2's test text) and the
// same 32 greedy tokens through the KV cache.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixture_param_name.h"
#include "decoder_fixtures.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {
namespace {

struct TransformersReference {
  std::vector<int32_t> ids, prompt, greedy;
  std::vector<float> logits;
};

TransformersReference read(const std::string& fixture) {
  const auto ck = io::Checkpoint::open(test::decoder_fixture(fixture) / "reference_transformers.safetensors");
  const auto ints = [&](const char* name) {
    const auto& t = ck.at(name);
    std::vector<int32_t> v(static_cast<std::size_t>(t.numel()));
    std::memcpy(v.data(), t.data, t.nbytes);
    return v;
  };
  return {ints("token_ids"), ints("greedy_prompt"), ints("greedy_ids"), ck.to_f32("logits")};
}

class TransformersReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformersReferenceTest, Fp32LogitsWithin1e4AndTheSameGreedyTokens) {
  const auto ref = read(GetParam());
  const auto model = load_decoder_lm(test::decoder_fixture(GetParam()));
  const auto n = static_cast<int64_t>(ref.ids.size());
  const int64_t v = model.config().vocab_size;
  ASSERT_EQ(ref.logits.size(), static_cast<std::size_t>(n * v));
  auto cache = model.make_cache(n);
  std::vector<float> logits(static_cast<std::size_t>(n * v));
  model.forward(ref.ids.data(), n, cache, logits.data());
  float worst = 0.0f;
  for (std::size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - ref.logits[i]));
  EXPECT_LE(worst, 1e-4f) << "largest |qjoule - transformers| over " << n << " tokens";
  EXPECT_EQ(test::greedy_tokens(model, ref.prompt, ref.greedy.size()), ref.greedy);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TransformersReferenceTest,
                         ::testing::Values("trained-llama", "tiny-llama", "tiny-qwen2", "tiny-gpt2"),
                         qjoule::test::FixtureParamName());

}  // namespace
}  // namespace qjoule::model

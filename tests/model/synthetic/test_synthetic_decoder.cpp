// The synthetic Llama (the decode benchmark's model): deterministic, Hugging Face names and shapes,
// TinyLlama's shapes by default, it runs in FP32 and in a 4-bit format, and a bad spec is one line; with
// experts, a Mixtral whose experts are drawn as the model builds them.
#include "qjoule/model/synthetic/synthetic_decoder.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {
namespace {

SyntheticDecoderSpec small_spec() {
  SyntheticDecoderSpec s;
  s.name = "small";
  s.vocab_size = 64;
  s.hidden_size = 128;
  s.num_layers = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.intermediate_size = 256;
  s.max_positions = 32;
  return s;
}

TEST(SyntheticDecoder, TinyLlamaShapes) {
  const auto s = tinyllama_shapes_spec(32000);
  EXPECT_EQ(s.num_layers, 22);
  EXPECT_EQ(s.hidden_size, 2048);
  EXPECT_EQ(s.num_heads, 32);
  EXPECT_EQ(s.num_kv_heads, 4);
  EXPECT_EQ(s.intermediate_size, 5632);
  EXPECT_EQ(s.vocab_size, 32000);
}

TEST(SyntheticDecoder, SameSeedSameParametersWithHuggingFaceNames) {
  const auto a = synthetic_decoder_params(small_spec());
  const auto b = synthetic_decoder_params(small_spec());
  ASSERT_EQ(a.layers.size(), 2u);
  EXPECT_EQ(a.layers[1].k.name, "model.layers.1.self_attn.k_proj");
  EXPECT_EQ(a.layers[1].k.out_features, 64);  // 2 KV heads × head_dim 32
  EXPECT_EQ(a.layers[0].down.in_features, 256);
  EXPECT_EQ(a.layers[0].mlp_norm.name, "model.layers.0.post_attention_layernorm");
  EXPECT_EQ(a.lm_head.name, "lm_head");
  EXPECT_EQ(a.config.head_dim, 32);
  EXPECT_EQ(a.layers[1].gate.weight, b.layers[1].gate.weight);
  EXPECT_EQ(a.token_embeddings, b.token_embeddings);
}

TEST(SyntheticDecoder, RunsInFp32AndInt4WithFiniteLogits) {
  const auto params = synthetic_decoder_params(small_spec());
  for (const std::string precision : {"fp32", "int4"}) {
    quant::LayerPolicyOptions po;
    po.precision = precision;
    const DecoderLM m(params, quantized_linear_factory(quant::LayerPolicy::parse(po), {}));
    auto cache = m.make_cache(16);
    const std::vector<int32_t> ids{1, 5, 9, 63};
    std::vector<float> logits(64);
    m.forward(ids.data(), 4, cache, logits.data(), 3);
    const int32_t next = 7;
    m.forward(&next, 1, cache, logits.data(), 0);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << precision;
    EXPECT_EQ(cache.size(), 5);
  }
}

TEST(SyntheticDecoder, HeadsThatDoNotDivideTheHiddenSizeAreAnError) {
  auto s = small_spec();
  s.num_heads = 5;
  EXPECT_THAT([&] { synthetic_decoder_params(s); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("synthetic decoder 'small'"),
                                                               ::testing::HasSubstr("hidden size 128"),
                                                               ::testing::HasSubstr("5 heads"))));
  s = small_spec();
  s.num_layers = 0;
  EXPECT_THAT([&] { synthetic_decoder_params(s); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("layers 0")));
}

TEST(SyntheticDecoder, MixtralShapes) {
  const auto s = mixtral_shapes_spec();
  EXPECT_EQ(s.num_layers, 16);
  EXPECT_EQ(s.num_experts, 8);
  EXPECT_EQ(s.experts_per_token, 2);
  EXPECT_EQ(s.intermediate_size, 5632);
  EXPECT_EQ(s.num_kv_heads, 8);
}

// A mixture: Mixtral's names, experts drawn when built (the same weights in any order), a decode step that reads
// its top-2 experts' bytes (the reports' token_share), and every expert Linear in the run's format.
TEST(SyntheticDecoder, AMixtureDrawsEachExpertWhenBuiltAndRunsInInt4) {
  auto spec = small_spec();
  spec.num_experts = 4;
  spec.experts_per_token = 2;
  auto params = synthetic_decoder_params(spec);
  ASSERT_EQ(params.layers[1].experts.size(), 4u);
  EXPECT_EQ(params.layers[1].experts[2].up.name, "model.layers.1.block_sparse_moe.experts.2.w3");
  EXPECT_EQ(params.layers[1].router.name, "model.layers.1.block_sparse_moe.gate");
  EXPECT_TRUE(params.layers[1].experts[2].up.weight.empty());
  LinearParams a = params.layers[1].experts[2].up, b = a;
  params.load_linear(a);
  params.load_linear(params.layers[0].experts[0].gate);
  params.load_linear(b);
  EXPECT_EQ(a.weight.size(), 256u * 128u);
  EXPECT_EQ(a.weight, b.weight);
  EXPECT_NE(a.weight, params.layers[0].experts[0].gate.weight);

  quant::LayerPolicyOptions po;
  po.precision = "int4";
  const DecoderLM m(synthetic_decoder_params(spec), quantized_linear_factory(quant::LayerPolicy::parse(po), {}));
  int experts = 0;
  for (const auto& r : m.linear_reports()) {
    if (r.name.find(".experts.") == std::string::npos) continue;
    ++experts;
    EXPECT_EQ(r.format, "int4");
    EXPECT_DOUBLE_EQ(r.token_share, 0.5);
  }
  EXPECT_EQ(experts, 2 * 4 * 2);  // gate | up fused, down; 4 experts; 2 layers
  auto cache = m.make_cache(16);
  const std::vector<int32_t> ids{1, 5, 9, 63};
  std::vector<float> logits(64);
  m.forward(ids.data(), 4, cache, logits.data(), 3);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  spec.experts_per_token = 5;
  EXPECT_THAT([&] { synthetic_decoder_params(spec); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("4 experts, top-5")));
}

}  // namespace
}  // namespace qjoule::model

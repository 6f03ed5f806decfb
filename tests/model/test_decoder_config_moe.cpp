// The mixture-of-experts decoders' config.json (Mixtral, Qwen3-MoE, OLMoE) as transformers reads it, reconciled
// with the router and expert tensors, and every malformed field or missing expert as one line naming it.
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "edited_decoder_config.h"
#include "error_of.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qjoule::model::DecoderArch;
using qjoule::test::decoder_fixture;
using qjoule::test::error_of;
using qjoule::test::load_config;
using ::testing::HasSubstr;

fs::path edited_moe_copy(const std::string& fixture, const std::string& test, const std::function<void(json&)>& edit) {
  return qjoule::test::edited_decoder_copy(fixture, "moe_" + test, edit);
}

std::string config_error(const std::string& fixture, const std::string& test, const std::function<void(json&)>& edit) {
  const auto dir = edited_moe_copy(fixture, test, edit);
  return error_of([&] { load_config(dir); });
}

TEST(MoeConfig, ReadsEachFixtureAsTransformersDoes) {
  const auto mixtral = load_config(decoder_fixture("tiny-mixtral"));
  EXPECT_EQ(mixtral.arch, DecoderArch::Mixtral);
  EXPECT_EQ(mixtral.moe.num_experts, 4);
  EXPECT_EQ(mixtral.moe.experts_per_token, 2);
  EXPECT_EQ(mixtral.moe.expert_intermediate_size, 32);
  EXPECT_TRUE(mixtral.moe.normalize_top_k);  // Mixtral always renormalises
  EXPECT_EQ(mixtral.moe_block(), "block_sparse_moe.");
  EXPECT_EQ(mixtral.moe.sparse_layer, (std::vector<bool>{true, true}));
  EXPECT_FALSE(mixtral.qk_norm);

  const auto qwen = load_config(decoder_fixture("tiny-qwen3-moe"));
  EXPECT_EQ(qwen.arch, DecoderArch::Qwen3Moe);
  EXPECT_EQ(qwen.moe.num_experts, 6);
  EXPECT_EQ(qwen.moe.experts_per_token, 3);
  EXPECT_EQ(qwen.moe.expert_intermediate_size, 16);
  EXPECT_EQ(qwen.intermediate_size, 48);  // the dense layer's (mlp_only_layers [1])
  EXPECT_EQ(qwen.moe.sparse_layer, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(qwen.moe.normalize_top_k);
  EXPECT_TRUE(qwen.qk_norm);
  EXPECT_FALSE(qwen.qk_norm_whole);

  const auto olmoe = load_config(decoder_fixture("tiny-olmoe"));
  EXPECT_EQ(olmoe.arch, DecoderArch::Olmoe);
  EXPECT_EQ(olmoe.moe.num_experts, 4);
  EXPECT_FALSE(olmoe.moe.normalize_top_k);  // norm_topk_prob false
  EXPECT_TRUE(olmoe.qk_norm && olmoe.qk_norm_whole);
}

TEST(MoeConfig, DecoderSparseStepAndTransformers5sExpertCountAreRead) {
  const auto dir = edited_moe_copy("tiny-qwen3-moe", "step", [](json& c) {
    c.erase("mlp_only_layers");
    c["decoder_sparse_step"] = 2;  // layers (i + 1) % 2 == 0: layer 1 only, which stores a dense MLP
    c["num_local_experts"] = c["num_experts"];
  });
  EXPECT_THAT(error_of([&] { qjoule::model::load_decoder_lm(dir); }), HasSubstr("'model.layers.1.mlp.gate.weight'"));
}

TEST(MoeConfig, MalformedFieldsAreOneLineNamingThem) {
  EXPECT_THAT(config_error("tiny-mixtral", "topk", [](json& c) { c["num_experts_per_tok"] = 5; }),
              HasSubstr("num_experts_per_tok = 5, expected 1 to the 4 experts"));
  EXPECT_THAT(config_error("tiny-mixtral", "count", [](json& c) { c["num_local_experts"] = 8; }),
              HasSubstr("num_local_experts"));
  EXPECT_THAT(config_error("tiny-qwen3-moe", "both", [](json& c) { c["num_local_experts"] = 5; }),
              HasSubstr("num_local_experts = 5 and num_experts = 6; expected one expert count"));
  EXPECT_THAT(config_error("tiny-qwen3-moe", "width", [](json& c) { c["moe_intermediate_size"] = 20; }),
              HasSubstr("moe_intermediate_size"));
  EXPECT_THAT(config_error("tiny-qwen3-moe", "only", [](json& c) { c["mlp_only_layers"] = {7}; }),
              HasSubstr("mlp_only_layers holds 7, expected layer indices 0 to 2"));
  EXPECT_THAT(config_error("tiny-qwen3-moe", "none",
                           [](json& c) {
                             c["mlp_only_layers"] = {0, 1, 2};
                           }),
              HasSubstr("no layer of 3 is a mixture of experts"));
  EXPECT_THAT(config_error("tiny-qwen3-moe", "step0", [](json& c) { c["decoder_sparse_step"] = 0; }),
              HasSubstr("decoder_sparse_step = 0, expected a positive number"));
  EXPECT_THAT(config_error("tiny-olmoe", "clip", [](json& c) { c["clip_qkv"] = 8.0; }),
              HasSubstr("clip_qkv = 8.0 is not supported"));
}

// A checkpoint that lacks one expert's tensor (a shard left out) is one line naming it.
TEST(MoeConfig, AMissingExpertTensorIsOneLineNamingIt) {
  const auto dir = qjoule::test::temp_dir("decoder_config_moe_missing");
  fs::copy(decoder_fixture("tiny-olmoe"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto ck = qjoule::io::Checkpoint::open(decoder_fixture("tiny-olmoe"));
  std::vector<qjoule::io::TensorToWrite> kept;
  for (const auto& [name, t] : ck.tensors())
    if (name != "model.layers.1.mlp.experts.2.up_proj.weight")
      kept.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
  qjoule::io::write_safetensors(dir / "model.safetensors", kept);
  const std::string error = error_of([&] { qjoule::model::load_decoder_lm(dir); });
  EXPECT_THAT(error, HasSubstr("model.layers.1.mlp.experts.2.up_proj.weight"));
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

}  // namespace

// Gemma 3's config.json (Gemma3ForCausalLM, and the text part of Gemma3ForConditionalGeneration), Phi-3's
// (fused projections, a partial rotary factor, LongRoPE) and the sliding windows of every architecture, as
// transformers reads them, and every field qjoule does not do as one line naming it.
#include <filesystem>
#include <fstream>
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
using qjoule::test::decoder_fixture;
using qjoule::test::error_of;
using ::testing::HasSubstr;

using qjoule::test::load_config;

// Its temporary folders named arch_*: apart from test_decoder_config.cpp's.
fs::path edited_arch_copy(const std::string& fixture, const std::string& test, const std::function<void(json&)>& edit) {
  return qjoule::test::edited_decoder_copy(fixture, "arch_" + test, edit);
}

TEST(Gemma3Config, ReadsTheFixtureAsTransformersDoes) {
  const auto c = load_config(decoder_fixture("tiny-gemma3"));
  EXPECT_EQ(c.arch, qjoule::model::DecoderArch::Gemma3);
  EXPECT_EQ(c.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(c.layer_window, (std::vector<int64_t>{8, 8, 0}));  // sliding_window_pattern 3
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_EQ(c.local_rope_theta, 1e4);
  EXPECT_FLOAT_EQ(c.attention_scale, 1.0f / std::sqrt(24.0f));
  EXPECT_FLOAT_EQ(c.embedding_scale, 8.0f);
  EXPECT_TRUE(c.qk_norm && c.sandwich_norms && c.norm_offset_one && c.tie_word_embeddings);
  EXPECT_EQ(c.activation, "gelu_pytorch_tanh");
  EXPECT_EQ(c.prefix, "model.");
  EXPECT_EQ(c.inferred_fields, std::vector<std::string>{"tie_word_embeddings"});  // as the Hub's configs leave it
}

TEST(Gemma3Config, LayerTypesAndTransformers5sRopeParametersAreRead) {
  const auto dir = edited_arch_copy("tiny-gemma3", "layer_types", [](json& c) {
    c["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention"};
    c.erase("rope_theta");
    c.erase("rope_local_base_freq");
    c.erase("rope_scaling");
    c["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 5e5}}},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 2e4}}}};
  });
  const auto c = load_config(dir);
  EXPECT_EQ(c.layer_window, (std::vector<int64_t>{0, 8, 8}));
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.local_rope_theta, 2e4);
}

// The fixture's 40 reference tokens are five windows: full attention in every layer gives other logits
// (so the reference checks the window), the fixture's own config transformers' within 1e-4.
TEST(Gemma3Config, AWindowAsLongAsThePositionsIsFullAttentionAndTheFixtureNeedsTheWindow) {
  const auto dir = edited_arch_copy("tiny-gemma3", "long", [](json& j) { j["sliding_window"] = 128; });
  EXPECT_TRUE(load_config(dir).layer_window.empty());
  const auto ref = qjoule::test::read_decoder_reference("tiny-gemma3");
  const auto n = static_cast<int64_t>(ref.ids.size());
  ASSERT_EQ(n, 40);
  const auto max_diff = [&](const qjoule::model::DecoderLM& m) {
    std::vector<float> logits(ref.logits.size());
    auto cache = m.make_cache();
    m.forward(ref.ids.data(), n, cache, logits.data());
    double d = 0.0;
    for (std::size_t i = 0; i < logits.size(); ++i) d = std::max(d, double(std::fabs(logits[i] - ref.logits[i])));
    return d;
  };
  EXPECT_LE(max_diff(qjoule::model::load_decoder_lm(decoder_fixture("tiny-gemma3"))), 1e-4);
  EXPECT_GT(max_diff(qjoule::model::load_decoder_lm(dir)), 1e-2);
}

TEST(Gemma3Config, WhatQjouleDoesNotDoIsOneLineNamingTheField) {
  const auto cases = std::vector<std::pair<std::function<void(json&)>, std::string>>{
      {[](json& c) { c["final_logit_softcapping"] = 30.0; }, "final_logit_softcapping = 30.0 is not supported"},
      {[](json& c) { c["attn_logit_softcapping"] = 50.0; }, "attn_logit_softcapping = 50.0 is not supported"},
      {[](json& c) { c["use_bidirectional_attention"] = true; }, "use_bidirectional_attention = true"},
      {[](json& c) { c["hidden_activation"] = "relu"; }, "hidden_activation = 'relu' is not supported for Gemma 3"},
      {[](json& c) { c["layer_types"] = {"full_attention"}; }, "expected a list of 3 layer types"},
      {[](json& c) {
         c["layer_types"] = {"full_attention", "chunked_attention", "full_attention"};
       },
       "layer_types[1] = \"chunked_attention\" is not supported"},
      {[](json& c) { c["sliding_window"] = -2; }, "sliding_window = -2, expected a positive number"},
      {[](json& c) { c["sliding_window_pattern"] = 0; }, "sliding_window_pattern = 0"},
      {[](json& c) {
         c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
       },
       "type 'dynamic'"},
      {[](json& c) {
         c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
                                 {"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}};
         c.erase("rope_scaling");
       },
       "rope_parameters.sliding_attention.rope_type = 'linear' is not supported"},
  };
  int i = 0;
  for (const auto& [edit, expected] : cases) {
    const auto dir = edited_arch_copy("tiny-gemma3", "bad" + std::to_string(i++), edit);
    const auto m = error_of([&] { load_config(dir); });
    EXPECT_THAT(m, HasSubstr(expected));
    EXPECT_THAT(m, HasSubstr("config.json")) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

// A Gemma3ForConditionalGeneration checkpoint: config.json's text_config, tensors under
// model.language_model. (or language_model.model.); a missing text_config is one line.
TEST(Gemma3Config, TheTextPartOfAConditionalGenerationCheckpoint) {
  const auto dir = qjoule::test::temp_dir("decoder_config_gemma3_vlm");
  fs::copy(decoder_fixture("tiny-gemma3"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  json text;
  std::ifstream(dir / "config.json") >> text;
  text.erase("architectures");
  const json config = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                       {"model_type", "gemma3"},
                       {"text_config", text},
                       {"vision_config", {{"model_type", "siglip_vision_model"}}}};
  std::ofstream(dir / "config.json") << config.dump(2);
  // The fixture's tensors renamed as transformers 4.50 saved them.
  const auto ck = qjoule::io::Checkpoint::open(decoder_fixture("tiny-gemma3"));
  std::vector<qjoule::io::TensorToWrite> renamed;
  for (const auto& [name, t] : ck.tensors())
    renamed.push_back({"language_model." + name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
  qjoule::io::write_safetensors(dir / "model.safetensors", renamed);
  const auto c = load_config(dir);
  EXPECT_EQ(c.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(c.prefix, "language_model.model.");
  EXPECT_EQ(c.layer_window, (std::vector<int64_t>{8, 8, 0}));
  EXPECT_EQ(c.num_layers, 3);

  std::ofstream(dir / "config.json") << json{
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"}}.dump();
  EXPECT_THAT(error_of([&] { load_config(dir); }), HasSubstr("needs a text_config object; there is none"));
}

TEST(Phi3Config, ReadsTheFixtureAsTransformersDoes) {
  const auto c = load_config(decoder_fixture("tiny-phi3"));
  EXPECT_EQ(c.arch, qjoule::model::DecoderArch::Phi3);
  EXPECT_TRUE(c.fused_projections);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rotary_dim, 12);  // partial_rotary_factor 0.75
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32);
  EXPECT_EQ(c.rope_scaling.factor, 4.0);  // max_position_embeddings / original: no factor in config.json
  EXPECT_EQ(c.rope_scaling.short_factor.size(), 6u);
  EXPECT_TRUE(c.layer_window.empty());  // sliding_window 262144: beyond the positions
  // Phi3Config's older names for longrope are read as it.
  const auto su = load_config(edited_arch_copy("tiny-phi3", "su", [](json& j) { j["rope_scaling"]["type"] = "su"; }));
  EXPECT_EQ(su.rope_scaling.type, "longrope");
}

TEST(Phi3Config, WhatDoesNotFitIsOneLineNamingTheField) {
  const auto cases = std::vector<std::pair<std::function<void(json&)>, std::string>>{
      {[](json& c) { c["rope_scaling"].erase("long_factor"); },
       "rope_scaling.long_factor is missing, expected a list of numbers"},
      {[](json& c) {
         c["rope_scaling"]["short_factor"] = {1.0, "x"};
       },
       "rope_scaling.short_factor holds \"x\""},
      {[](json& c) { c["rope_scaling"]["type"] = "dynamic"; }, "type 'dynamic' is not supported"},
      {[](json& c) { c["partial_rotary_factor"] = 1.5; }, "partial_rotary_factor = 1.5, expected a number in (0, 1]"},
      {[](json& c) { c["partial_rotary_factor"] = 0.7; }, "partial_rotary_factor = 0.7 turns 11 of head_dim = 16"},
      {[](json& c) { c["num_attention_heads"] = 8; }, "but tensor 'model.layers.0.self_attn.qkv_proj.weight' has"},
      {[](json& c) { c["intermediate_size"] = 128; }, "intermediate_size = 128, but the rows of"},
  };
  int i = 0;
  for (const auto& [edit, expected] : cases) {
    const auto dir = edited_arch_copy("tiny-phi3", "phi3_bad" + std::to_string(i++), edit);
    const auto m = error_of([&] { load_config(dir); });
    EXPECT_THAT(m, HasSubstr(expected));
    EXPECT_THAT(m, HasSubstr("config.json")) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(SlidingWindows, EachArchitectureWindowsTheLayersTransformersWindows) {
  // Mistral: every layer; absent sliding_window is MistralConfig's 4096 (beyond these 128 positions: full).
  const auto mistral = load_config(edited_arch_copy("tiny-llama", "mistral", [](json& c) {
    c["model_type"] = "mistral";
    c["architectures"] = {"MistralForCausalLM"};
    c["rope_scaling"] = nullptr;
    c["sliding_window"] = 16;
  }));
  EXPECT_EQ(mistral.layer_window, std::vector<int64_t>(static_cast<std::size_t>(mistral.num_layers), 16));
  EXPECT_GT(mistral.max_positions, 16);  // no longer limited to the window
  // Llama: LlamaForCausalLM has no sliding window, whatever config.json says.
  const auto llama = load_config(edited_arch_copy("tiny-llama", "llama", [](json& c) { c["sliding_window"] = 16; }));
  EXPECT_TRUE(llama.layer_window.empty());
  // Qwen2: only with use_sliding_window, and only the layers from max_window_layers on.
  const auto off = load_config(edited_arch_copy("tiny-qwen2", "qwen_off", [](json& c) { c["sliding_window"] = 16; }));
  EXPECT_TRUE(off.layer_window.empty());
  const auto on = load_config(edited_arch_copy("tiny-qwen2", "qwen_on", [](json& c) {
    c["sliding_window"] = 16;
    c["use_sliding_window"] = true;
    c["max_window_layers"] = 1;
  }));
  ASSERT_EQ(on.layer_window.size(), static_cast<std::size_t>(on.num_layers));
  EXPECT_EQ(on.layer_window.front(), 0);
  EXPECT_EQ(on.layer_window.back(), 16);
}

}  // namespace

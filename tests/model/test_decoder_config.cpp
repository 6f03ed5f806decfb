// Decoder config.json reconciled with the checkpoint: fields inferred from tensor shapes, and every
// disagreement or unsupported setting as one line naming the field and both values.
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "decoder_fixtures.h"
#include "edited_decoder_config.h"
#include "error_of.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/unused_tensors.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using qjoule::model::load_decoder_config;
using qjoule::test::decoder_fixture;
using qjoule::test::error_of;

using qjoule::test::edited_decoder_copy;
using qjoule::test::load_config;

TEST(DecoderConfig, ReadsEachFixturesArchitecture) {
  const auto llama = load_config(decoder_fixture("tiny-llama"));
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  EXPECT_LT(llama.num_kv_heads, llama.num_heads);  // grouped-query attention
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_EQ(llama.rope_scaling.type, "llama3");
  EXPECT_TRUE(llama.inferred_fields.empty());
  const auto qwen = load_config(decoder_fixture("tiny-qwen2"));
  EXPECT_EQ(qwen.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.o_bias);
  EXPECT_TRUE(qwen.tie_word_embeddings);
  const auto qwen3 = load_config(decoder_fixture("tiny-qwen3"));
  EXPECT_EQ(qwen3.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(qwen3.head_dim, 32);  // explicit, not hidden / heads = 16
  EXPECT_EQ(qwen3.q_dim(), 128);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
  EXPECT_TRUE(qwen3.inferred_fields.empty());
  EXPECT_FALSE(qwen.qk_norm);
  const auto gpt2 = load_config(decoder_fixture("tiny-gpt2"));
  EXPECT_EQ(gpt2.architecture, "GPT2LMHeadModel");
  EXPECT_EQ(gpt2.prefix, "");  // tensors without "transformer.", as openai-community/gpt2 stores them
  EXPECT_EQ(gpt2.intermediate_size, 4 * gpt2.hidden_size);
}

TEST(DecoderConfig, InfersMissingFieldsFromTensorShapes) {
  const auto dir = edited_decoder_copy("tiny-llama", "infer", [](json& c) {
    for (const char* f : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_key_value_heads"})
      c.erase(f);
  });
  const auto inferred = load_config(dir);
  const auto original = load_config(decoder_fixture("tiny-llama"));
  EXPECT_EQ(inferred.vocab_size, original.vocab_size);
  EXPECT_EQ(inferred.hidden_size, original.hidden_size);
  EXPECT_EQ(inferred.num_layers, original.num_layers);
  EXPECT_EQ(inferred.num_kv_heads, original.num_kv_heads);
  EXPECT_EQ(inferred.inferred_fields.size(), 5u);
  const auto gpt2 = edited_decoder_copy("tiny-gpt2", "infer_gpt2", [](json& c) {
    for (const char* f : {"vocab_size", "n_embd", "n_positions", "n_layer", "n_inner"}) c.erase(f);
  });
  EXPECT_EQ(load_config(gpt2).max_positions, load_config(decoder_fixture("tiny-gpt2")).max_positions);
}

TEST(DecoderConfig, DisagreementsNameTheFieldAndBothValues) {
  const auto kv = edited_decoder_copy("tiny-llama", "kv", [](json& c) { c["num_key_value_heads"] = 3; });
  const auto m1 = error_of([&] { load_config(kv); });
  EXPECT_NE(m1.find("num_key_value_heads = 3"), std::string::npos) << m1;
  EXPECT_NE(m1.find("model.layers.0.self_attn.k_proj.weight"), std::string::npos) << m1;

  const auto hidden = edited_decoder_copy("tiny-qwen2", "hidden", [](json& c) { c["hidden_size"] = 65; });
  const auto m2 = error_of([&] { load_config(hidden); });
  EXPECT_NE(m2.find("hidden_size = 65"), std::string::npos) << m2;
  EXPECT_NE(m2.find("model.embed_tokens.weight"), std::string::npos) << m2;

  const auto untied = edited_decoder_copy("tiny-qwen2", "untied", [](json& c) { c["tie_word_embeddings"] = false; });
  const auto m3 = error_of([&] { load_config(untied); });
  EXPECT_NE(m3.find("lm_head.weight"), std::string::npos) << m3;
}

// Values the model uses outside their range are one line naming the file, the field and the value:
// a norm epsilon or RoPE theta that is not positive (it would give NaN perplexities), a special token
// id outside the vocabulary.
TEST(DecoderConfig, ValuesOutsideTheirRangeNameTheField) {
  struct Case {
    const char* fixture;
    const char* field;
    json value;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"tiny-llama", "rms_norm_eps", -1e-6, "rms_norm_eps = -1e-06, expected a positive number"},
      {"tiny-llama", "rope_theta", 0, "rope_theta = 0, expected a positive number"},
      {"tiny-qwen2", "rms_norm_eps", 0.0, "rms_norm_eps = 0, expected a positive number"},
      {"tiny-gpt2", "layer_norm_epsilon", -0.5, "layer_norm_epsilon = -0.5, expected a positive number"},
      {"tiny-llama", "eos_token_id", 100000, "eos_token_id = 100000 is outside the vocabulary [0, "},
      {"tiny-gpt2", "bos_token_id", -1, "bos_token_id = -1 is outside the vocabulary [0, "},
  };
  for (const auto& c : cases) {
    const auto dir =
        edited_decoder_copy(c.fixture, std::string("range_") + c.field, [&](json& j) { j[c.field] = c.value; });
    const auto m = error_of([&] { load_config(dir); });
    EXPECT_NE(m.find("config.json: " + std::string(c.expected)), std::string::npos) << c.field << ": " << m;
  }
}

// A tensor the model does not read is one warning line naming it (known buffers such as GPT-2's
// attention masks are not); a checkpoint the model reads whole gives none.
TEST(DecoderConfig, TensorsTheModelDoesNotReadAreOneWarningLine) {
  const auto dir = edited_decoder_copy("tiny-llama", "unused", [](json&) {});
  {
    const auto original = qjoule::io::Checkpoint::open(decoder_fixture("tiny-llama"));
    std::vector<qjoule::io::TensorToWrite> tensors;
    for (const auto& [name, t] : original.tensors())
      tensors.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
    const std::vector<float> extra(4, 1.0f), mask(4, 1.0f);
    tensors.push_back(
        {"model.layers.0.mlp.gate_proj.wieght", qjoule::io::DType::F32, {4}, std::as_bytes(std::span(extra))});
    tensors.push_back(
        {"model.layers.0.self_attn.rotary_emb.inv_freq", qjoule::io::DType::F32, {4}, std::as_bytes(std::span(mask))});
    qjoule::io::write_safetensors(dir / "model.safetensors", tensors);
  }
  const auto ck = qjoule::io::Checkpoint::open(dir);
  const auto model = qjoule::model::DecoderLM(
      qjoule::model::load_decoder_params(ck, load_decoder_config(dir, ck), /*defer_linears=*/true),
      qjoule::model::fp32_linear_factory());
  EXPECT_EQ(qjoule::model::unused_tensors_warning(ck),
            dir.string() + ": 1 tensor is not used by the model: model.layers.0.mlp.gate_proj.wieght");

  const auto whole = qjoule::io::Checkpoint::open(decoder_fixture("tiny-gpt2"));
  const auto gpt2 = qjoule::model::DecoderLM(
      qjoule::model::load_decoder_params(whole, load_decoder_config(decoder_fixture("tiny-gpt2"), whole)),
      qjoule::model::fp32_linear_factory());
  EXPECT_EQ(qjoule::model::unused_tensors_warning(whole), "");
}

TEST(DecoderConfig, UnsupportedSettingsAreOneClearLine) {
  const auto arch = edited_decoder_copy("tiny-llama", "arch", [](json& c) {
    c["model_type"] = "mamba";
    c["architectures"] = {"MambaForCausalLM"};
  });
  const auto m1 = error_of([&] { load_config(arch); });
  EXPECT_NE(m1.find("model_type 'mamba'"), std::string::npos) << m1;
  EXPECT_NE(m1.find("supported: llama"), std::string::npos) << m1;
  EXPECT_EQ(qjoule::model::model_family(arch), qjoule::model::ModelFamily::Unknown);

  const auto dynamic = edited_decoder_copy("tiny-llama", "dynamic", [](json& c) {
    c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  });
  const auto m2 = error_of([&] { load_config(dynamic); });
  EXPECT_NE(m2.find("rope_scaling type 'dynamic' is not supported"), std::string::npos) << m2;

  const auto act = edited_decoder_copy("tiny-gpt2", "act", [](json& c) { c["activation_function"] = "relu"; });
  const auto m3 = error_of([&] { load_config(act); });
  EXPECT_NE(m3.find("activation_function = 'relu'"), std::string::npos) << m3;
}

TEST(DecoderConfig, ShapesThatDisagreeWithTheConfigNameTheTensor) {
  const auto dir = edited_decoder_copy("tiny-llama", "ffn", [](json& c) { c["intermediate_size"] = 7; });
  const auto m = error_of([&] { (void)qjoule::model::load_decoder_lm(dir); });
  EXPECT_NE(m.find("intermediate_size = 7"), std::string::npos) << m;
  EXPECT_NE(m.find("mlp.gate_proj.weight"), std::string::npos) << m;
}

// Qwen3's per-head norms are tensors of head_dim values: one missing, or of another width, is one line
// naming the tensor.
TEST(DecoderConfig, Qwen3sHeadNormsAreCheckedLikeEveryTensor) {
  const auto dir = qjoule::test::temp_dir("decoder_config_qwen3_norms");
  fs::copy(decoder_fixture("tiny-qwen3"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  {
    const auto ck = qjoule::io::Checkpoint::open(decoder_fixture("tiny-qwen3"));
    std::vector<qjoule::io::TensorToWrite> tensors;
    for (const auto& [name, t] : ck.tensors())
      if (name != "model.layers.1.self_attn.k_norm.weight")
        tensors.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
    qjoule::io::write_safetensors(dir / "model.safetensors", tensors);
  }
  const auto missing = error_of([&] { qjoule::model::load_decoder_lm(dir); });
  EXPECT_NE(missing.find("model.layers.1.self_attn.k_norm.weight"), std::string::npos) << missing;
  EXPECT_EQ(missing.find('\n'), std::string::npos) << missing;
}

// transformers 5 writes rope_theta (and the scaling) inside rope_parameters: read as the top-level fields
// are, the same model; both forms with two values is one line.
TEST(DecoderConfig, RopeParametersOfTransformers5AreReadAsTheTopLevelFields) {
  const auto moved = edited_decoder_copy("tiny-qwen3", "rope_parameters", [](json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", c["rope_theta"]}};
    c.erase("rope_theta");
    c.erase("rope_scaling");
  });
  const auto original = load_config(decoder_fixture("tiny-qwen3"));
  const auto read = load_config(moved);
  EXPECT_EQ(read.rope_theta, 1e6);
  EXPECT_EQ(read.rope_theta, original.rope_theta);
  EXPECT_EQ(read.rope_scaling.type, "default");
  const auto llama3 = edited_decoder_copy("tiny-llama", "rope_parameters_llama3", [](json& c) {
    json p = c["rope_scaling"];
    p["rope_theta"] = c["rope_theta"];
    c["rope_parameters"] = p;
    c.erase("rope_theta");
    c.erase("rope_scaling");
  });
  const auto ll = load_config(llama3), lo = load_config(decoder_fixture("tiny-llama"));
  EXPECT_EQ(ll.rope_scaling.type, "llama3");
  EXPECT_EQ(ll.rope_scaling.factor, lo.rope_scaling.factor);
  EXPECT_EQ(ll.rope_theta, lo.rope_theta);
  const auto both = edited_decoder_copy("tiny-qwen3", "rope_parameters_both", [](json& c) {
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  });
  const auto m = error_of([&] { load_config(both); });
  EXPECT_NE(m.find("rope_theta = 1000000 and rope_parameters.rope_theta = 500000; expected one value"),
            std::string::npos)
      << m;
  const auto dynamic = edited_decoder_copy("tiny-qwen3", "rope_parameters_dynamic", [](json& c) {
    c["rope_parameters"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  });
  const auto d = error_of([&] { load_config(dynamic); });
  EXPECT_NE(d.find("rope_parameters type 'dynamic' is not supported"), std::string::npos) << d;
  const auto not_object = edited_decoder_copy("tiny-qwen3", "rope_parameters_list", [](json& c) {
    c.erase("rope_scaling");
    c["rope_parameters"] = json::array({1});
  });
  const auto o = error_of([&] { load_config(not_object); });
  EXPECT_NE(o.find("config.json: rope_parameters is [1], expected an object or null"), std::string::npos) << o;
  const auto negative = edited_decoder_copy("tiny-qwen3", "rope_parameters_negative", [](json& c) {
    c.erase("rope_theta");
    c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1}};
  });
  const auto n = error_of([&] { load_config(negative); });
  EXPECT_NE(n.find("config.json: rope_parameters.rope_theta = -1, expected a positive number"), std::string::npos) << n;
}

}  // namespace

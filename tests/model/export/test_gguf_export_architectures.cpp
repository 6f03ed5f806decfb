// `qjoule export --to gguf` of Gemma 3 and Phi-3 as llama.cpp's gemma3 and phi3 read them (its converter's
// names and keys): Gemma's norms as 1 + w, its windows, which layers have them and their RoPE base; Phi-3's
// fused q | k | v and gate | up, partial rotary and LongRoPE factors. A configuration llama.cpp would read
// otherwise is one line. The file read back runs bit for bit what int4:g=32:sym runs on the original.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "edited_decoder_config.h"
#include "error_of.h"
#include "prequantized/quantized_checkpoint_test_util.h"
#include "qjoule/io/gguf.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/export/gguf_export.h"
#include "qjoule/model/export/gguf_import.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::io::GgmlType;
using qjoule::test::error_of;
using ::testing::HasSubstr;

// tiny-gemma3 with queries scaled by 1/sqrt(head_dim), as every Gemma 3 but the 27B is (its fixture's 24
// is there to test query_pre_attn_scalar against transformers).
fs::path gemma3_as_published() {
  return qjoule::test::edited_decoder_copy("tiny-gemma3", "gguf_gemma3",
                                           [](nlohmann::json& c) { c["query_pre_attn_scalar"] = 32; });
}

// The same as a Gemma3ForConditionalGeneration checkpoint: config in text_config, tensors under
// language_model. as transformers 4.50 saved them.
fs::path gemma3_conditional_generation() {
  const fs::path src = gemma3_as_published(), dir = qjoule::test::temp_dir("gguf_gemma3_vlm");
  nlohmann::json text;
  std::ifstream(src / "config.json") >> text;
  text.erase("architectures");
  std::ofstream(dir / "config.json") << nlohmann::json{
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"},
      {"text_config", text}}.dump(2);
  fs::copy_file(src / "tokenizer.json", dir / "tokenizer.json");
  const auto ck = qjoule::io::Checkpoint::open(src);
  std::vector<qjoule::io::TensorToWrite> renamed;
  for (const auto& [name, t] : ck.tensors())
    renamed.push_back({"language_model." + name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
  qjoule::io::write_safetensors(dir / "model.safetensors", renamed);
  return dir;
}

std::vector<float> f32_of(const qjoule::io::GgufTensor& t) {
  std::vector<float> v(t.nbytes / sizeof(float));
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

TEST(GgufExportArchitectures, Gemma3IsLlamaCppsGemma3WithItsWindowsAndNorms) {
  const auto src = gemma3_as_published();
  const auto out = qjoule::test::temp_dir("gguf_gemma3_out") / "m.gguf";
  const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("int4:g=32:sym"), out);
  EXPECT_EQ(summary.architecture, "gemma3");
  EXPECT_EQ(summary.quantized, 21);  // 7 block Linears, 3 layers
  const auto g = qjoule::io::read_gguf(out);
  EXPECT_EQ(g.metadata.at("gemma3.attention.sliding_window"), 8);
  EXPECT_EQ(g.metadata.at("gemma3.attention.sliding_window_pattern"), (nlohmann::json{true, true, false}));
  EXPECT_EQ(g.metadata.at("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_EQ(g.metadata.at("gemma3.rope.freq_base"), 1000000.0);
  EXPECT_EQ(g.metadata.at("gemma3.rope.scaling.type"), "linear");  // the full layers'
  EXPECT_EQ(g.metadata.at("gemma3.attention.key_length"), 32);
  // The norm before and after each sublayer under llama.cpp's names, each as 1 + w.
  const auto ck = qjoule::io::Checkpoint::open(src);
  for (const auto& [hf, gg] : std::vector<std::pair<std::string, std::string>>{
           {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
           {"model.layers.0.post_attention_layernorm.weight", "blk.0.post_attention_norm.weight"},
           {"model.layers.1.pre_feedforward_layernorm.weight", "blk.1.ffn_norm.weight"},
           {"model.layers.2.post_feedforward_layernorm.weight", "blk.2.post_ffw_norm.weight"},
           {"model.layers.2.self_attn.q_norm.weight", "blk.2.attn_q_norm.weight"},
           {"model.norm.weight", "output_norm.weight"}}) {
    auto expected = ck.to_f32(hf);
    for (float& w : expected) w = 1.0f + w;
    EXPECT_EQ(f32_of(g.tensors.at(gg)), expected) << gg;
  }
  EXPECT_EQ(g.tensors.at("blk.0.ffn_gate.weight").type, GgmlType::q4_0);
  EXPECT_EQ(g.tensors.count("output.weight"), 0u) << "tied: llama.cpp reads token_embd as the head";
}

TEST(GgufExportArchitectures, Phi3IsLlamaCppsPhi3WithFusedTensorsAndLongRopeFactors) {
  const auto src = qjoule::test::decoder_fixture("tiny-phi3");
  const auto out = qjoule::test::temp_dir("gguf_phi3_out") / "m.gguf";
  const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("int4:g=32:sym"), out);
  EXPECT_EQ(summary.architecture, "phi3");
  const auto g = qjoule::io::read_gguf(out);
  EXPECT_EQ(g.metadata.at("phi3.rope.dimension_count"), 12);  // partial_rotary_factor 0.75 of 16
  EXPECT_EQ(g.metadata.at("phi3.rope.scaling.original_context_length"), 32);
  EXPECT_NEAR(g.metadata.at("phi3.rope.scaling.attn_factor").get<double>(),
              std::sqrt(1 + std::log(4.0) / std::log(32.0)), 1e-6);
  EXPECT_EQ(g.metadata.at("phi3.attention.sliding_window"), 0);
  EXPECT_EQ(f32_of(g.tensors.at("rope_factors_long.weight")), (std::vector<float>{1.0f, 1.5f, 2.5f, 4.0f, 6.0f, 9.0f}));
  EXPECT_EQ(f32_of(g.tensors.at("rope_factors_short.weight")),
            (std::vector<float>{1.0f, 1.1f, 1.3f, 1.6f, 2.0f, 2.5f}));
  const auto& qkv = g.tensors.at("blk.0.attn_qkv.weight");
  EXPECT_EQ(qkv.type, GgmlType::q4_0);
  EXPECT_EQ(qkv.ne, (std::vector<int64_t>{64, 64 + 2 * 32}));  // q | k | v rows, not permuted (NeoX RoPE)
  EXPECT_EQ(g.tensors.at("blk.1.ffn_up.weight").ne, (std::vector<int64_t>{64, 2 * 96}));  // gate | up
  EXPECT_EQ(g.tensors.at("blk.1.ffn_norm.weight").type, GgmlType::f32);
}

TEST(GgufExportArchitectures, ReadBackRunsBitForBitQjoulesOwnInt4G32Sym) {
  for (const fs::path& src :
       {gemma3_as_published(), gemma3_conditional_generation(), qjoule::test::decoder_fixture("tiny-phi3")}) {
    const auto dir = qjoule::test::temp_dir("gguf_back_" + src.filename().string());
    qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("int4:g=32:sym"), dir / "m.gguf");
    qjoule::model::import_gguf(dir / "m.gguf", dir / "back");
    EXPECT_EQ(qjoule::io::read_gguf(dir / "m.gguf").tensors.count("token_embd.weight"), 1u) << "CausalLM names";
    const auto factory = qjoule::test::precision_factory("int4:g=32:sym");
    const auto back = qjoule::model::load_decoder_lm(dir / "back", factory);
    const auto own = qjoule::model::load_decoder_lm(src, factory);
    const auto a = qjoule::test::prompt_logits(back), b = qjoule::test::prompt_logits(own);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << src << ": bit for bit";
  }
}

TEST(GgufExportArchitectures, WhatLlamaCppWouldReadOtherwiseIsOneLine) {
  const auto dir = qjoule::test::temp_dir("gguf_arch_refusals");
  const auto refusal = [&](const fs::path& model) {
    return error_of(
        [&] { qjoule::model::export_gguf(model, qjoule::quant::parse_format_spec("fp16"), dir / "x.gguf"); });
  };
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-gemma3")),
              HasSubstr("query_pre_attn_scalar = 24 scales queries by its 1/sqrt, and llama.cpp's gemma3 by "
                        "1/sqrt(head_dim = 32); expected query_pre_attn_scalar = head_dim"));
  EXPECT_THAT(refusal(qjoule::test::edited_decoder_copy("tiny-phi3", "gguf_phi3_window",
                                                        [](nlohmann::json& c) { c["sliding_window"] = 16; })),
              HasSubstr("sliding_window = 16 is below the 128 positions, and llama.cpp's phi3 attends to every "
                        "position (Gemma 3's windows are exported)"));
  EXPECT_THAT(refusal(qjoule::test::edited_decoder_copy("tiny-gemma3", "gguf_gemma3_rope",
                                                        [](nlohmann::json& c) {
                                                          c["query_pre_attn_scalar"] = 32;
                                                          c["rope_scaling"] = {
                                                              {"rope_type", "llama3"},
                                                              {"factor", 8.0},
                                                              {"low_freq_factor", 1.0},
                                                              {"high_freq_factor", 4.0},
                                                              {"original_max_position_embeddings", 32}};
                                                        })),
              HasSubstr("rope_scaling type 'llama3' has no GGUF form qjoule writes for Gemma3ForCausalLM (default and "
                        "linear)"));
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

// A GGUF with qjoule's keys whose architecture the export never writes: one line naming it.
TEST(GgufImportArchitectures, AnArchitectureTheExportDoesNotWriteIsOneLine) {
  const auto dir = qjoule::test::temp_dir("gguf_import_arch");
  qjoule::model::export_gguf(qjoule::test::decoder_fixture("tiny-qwen2"), qjoule::quant::parse_format_spec("fp16"),
                             dir / "m.gguf");
  std::string bytes(static_cast<std::size_t>(fs::file_size(dir / "m.gguf")), '\0');
  std::ifstream(dir / "m.gguf", std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  for (auto at = bytes.find("qwen2"); at != std::string::npos; at = bytes.find("qwen2", at))
    bytes.replace(at, 5, "mpt07");
  std::ofstream(dir / "other.gguf", std::ios::binary) << bytes;
  EXPECT_THAT(error_of([&] { qjoule::model::import_gguf(dir / "other.gguf", dir / "back"); }),
              HasSubstr("other.gguf: general.architecture 'mpt07', expected llama, qwen2, qwen3, gemma3, phi3, "
                        "qwen3moe or olmoe (what qjoule's GGUF export writes)"));
}

}  // namespace

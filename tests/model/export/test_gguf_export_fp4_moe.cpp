// `qjoule export --to gguf` of the FP4 formats and of mixtures: MXFP4 and NVFP4 blocks that decode, by ggml's
// definitions (ggml-quants.c's dequantize_row_mxfp4 / _nvfp4, written out here), to exactly the weights
// qjoule's mxfp4 and nvfp4 run, NVFP4's tensor scales beside them; Mixtral, Qwen3-MoE and OLMoE as llama.cpp's
// llama, qwen3moe and olmoe read them (experts stacked, the router F32); the file read back runs bit for bit
// what the original runs; and what llama.cpp would run otherwise is one line.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
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
#include "qjoule/quant/quantize_fp4.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::io::GgmlType;
using qjoule::test::error_of;
using ::testing::HasSubstr;

// ggml's kvalues_mxfp4 (2 · E2M1) and its E8M0 / UE4M3 decoders, which return half the scale.
constexpr int8_t kValuesX2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
float e8m0_half(uint8_t e) { return std::ldexp(1.0f, int(e) - 128); }
float ue4m3_half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF, man = x & 7;
  const float raw = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

// A GGUF matrix (or one expert of a stacked one) decoded as ggml does, times NVFP4's tensor scale.
std::vector<float> ggml_decode(const qjoule::io::GgufTensor& t, int64_t expert = 0, float tensor_scale = 1.0f) {
  const int64_t cols = t.ne[0], rows = t.ne[1];
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  const uint64_t each = t.nbytes / static_cast<uint64_t>(t.ne.size() == 3 ? t.ne[2] : 1);
  const auto* p = reinterpret_cast<const uint8_t*>(t.data) + static_cast<uint64_t>(expert) * each;
  if (t.type == GgmlType::mxfp4) {
    for (std::size_t b = 0; b < w.size() / 32; ++b, p += 17)
      for (int j = 0; j < 16; ++j) {
        w[b * 32 + j] = kValuesX2[p[1 + j] & 15] * e8m0_half(p[0]);
        w[b * 32 + j + 16] = kValuesX2[p[1 + j] >> 4] * e8m0_half(p[0]);
      }
  } else {
    for (std::size_t b = 0; b < w.size() / 64; ++b, p += 36)
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 8; ++j) {
          const uint8_t q = p[4 + 8 * s + j];
          w[b * 64 + 16 * s + j] = float(kValuesX2[q & 15]) * ue4m3_half(p[s]) * tensor_scale;
          w[b * 64 + 16 * s + j + 8] = float(kValuesX2[q >> 4]) * ue4m3_half(p[s]) * tensor_scale;
        }
  }
  return w;
}

// What qjoule's mxfp4 / nvfp4 run for weights w [rows, cols]; nvfp4 with the tensor scale of `whole`, the
// Linear qjoule runs (Q | K | V, gate | up fused), when given.
std::vector<float> qjoule_fp4(const std::vector<float>& w, int64_t rows, int64_t cols, bool nv,
                              const std::vector<float>& whole = {}) {
  std::vector<float> out(w.size());
  if (nv) {
    const std::vector<float>& all = whole.empty() ? w : whole;
    const auto m = qjoule::quant::quantize_matrix_nvfp4(
        w.data(), rows, cols, "w", qjoule::quant::nvfp4_tensor_scale(all.data(), static_cast<int64_t>(all.size())));
    for (int64_t r = 0; r < rows; ++r)
      qjoule::quant::dequantize_row_nvfp4_ref(m.row(r), cols, m.tensor_scale, out.data() + r * cols);
  } else {
    const auto m = qjoule::quant::quantize_matrix_mxfp4(w.data(), rows, cols, "w");
    for (int64_t r = 0; r < rows; ++r) qjoule::quant::dequantize_row_mxfp4_ref(m.row(r), cols, out.data() + r * cols);
  }
  return out;
}

float scale_of(const qjoule::io::GgufFile& g, const std::string& name, int64_t expert = 0) {
  float s = 0.0f;
  std::memcpy(&s, g.tensors.at(name).data + expert * 4, 4);
  return s;
}

TEST(GgufExportFp4, Mxfp4AndNvfp4DecodeByGgmlsDefinitionsToQjoulesOwnWeights) {
  const auto src = qjoule::test::decoder_fixture("tiny-qwen3");  // NeoX RoPE: rows as stored
  const auto ck = qjoule::io::Checkpoint::open(src);
  for (const bool nv : {false, true}) {
    const auto out = qjoule::test::temp_dir(nv ? "gguf_nvfp4" : "gguf_mxfp4") / "m.gguf";
    const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec(nv ? "nvfp4" : "mxfp4"), out);
    EXPECT_EQ(summary.tensor_type, nv ? "NVFP4" : "MXFP4");
    EXPECT_EQ(summary.quantized, 14);
    const auto g = qjoule::io::read_gguf(out);
    EXPECT_EQ(g.metadata.at("general.file_type"), nv ? 39 : 38);
    // q_proj's tensor scale is Q | K | V's, gate_proj's gate | up's: qjoule runs each as one Linear.
    const auto concat = [&](std::vector<std::string> names) {
      std::vector<float> all;
      for (const auto& n : names) {
        const auto v = ck.to_f32(n);
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    const std::string l0 = "model.layers.0.", l1 = "model.layers.1.";
    const auto qkv =
        concat({l0 + "self_attn.q_proj.weight", l0 + "self_attn.k_proj.weight", l0 + "self_attn.v_proj.weight"});
    const auto gate_up = concat({l1 + "mlp.gate_proj.weight", l1 + "mlp.up_proj.weight"});
    for (const auto& [hf, gg, whole] : std::vector<std::tuple<std::string, std::string, std::vector<float>>>{
             {l0 + "self_attn.q_proj.weight", "blk.0.attn_q", qkv},
             {l1 + "self_attn.o_proj.weight", "blk.1.attn_output", {}},
             {l1 + "mlp.gate_proj.weight", "blk.1.ffn_gate", gate_up},
             {l1 + "mlp.down_proj.weight", "blk.1.ffn_down", {}}}) {
      const auto& t = g.tensors.at(gg + ".weight");
      EXPECT_EQ(t.type, nv ? GgmlType::nvfp4 : GgmlType::mxfp4) << gg;
      const auto shape = ck.at(hf).shape;
      const float s_t = nv ? scale_of(g, gg + ".scale") : 1.0f;
      if (nv) {
        EXPECT_EQ(g.tensors.at(gg + ".scale").ne, (std::vector<int64_t>{1})) << gg;
      }
      const auto want = qjoule_fp4(ck.to_f32(hf), shape[0], shape[1], nv, whole);
      const auto got = ggml_decode(t, 0, s_t);
      ASSERT_EQ(got.size(), want.size()) << gg;
      for (std::size_t i = 0; i < got.size(); ++i)  // the same codes and scales: one rounding of s_b · s_t apart
        ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * 1.2e-7f) << gg << " weight " << i;
    }
    if (nv) {
      EXPECT_EQ(scale_of(g, "blk.0.attn_q.scale"), scale_of(g, "blk.0.attn_v.scale"));
      EXPECT_NE(scale_of(g, "blk.0.attn_q.scale"), scale_of(g, "blk.0.attn_output.scale"));
    }
    EXPECT_EQ(g.tensors.at("token_embd.weight").type, GgmlType::f32) << "as stored";
    EXPECT_THAT(error_of([&] { qjoule::model::import_gguf(out, out.parent_path() / "back"); }),
                HasSubstr(std::string("m.gguf: tensor 'blk.0.attn_k.weight' is ") + (nv ? "NVFP4" : "MXFP4") +
                          ": qjoule reads back its Q4_0, F16, BF16 and F32 exports"));
  }
}

TEST(GgufExportMoe, MixtralIsLlamaCppsLlamaWithStackedExpertsAndAnF32Router) {
  const auto src = qjoule::test::decoder_fixture("tiny-mixtral");
  const auto ck = qjoule::io::Checkpoint::open(src);
  for (const char* spec : {"mxfp4", "int4:g=32:sym", "fp16"}) {
    const auto out = qjoule::test::temp_dir(std::string("gguf_mixtral_") + spec[0] + spec[1]) / "m.gguf";
    const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec(spec), out);
    EXPECT_EQ(summary.architecture, "llama");
    // 2 layers × (q, k, v, o + 4 experts × gate, up, down), the experts in 3 stacked tensors a layer.
    EXPECT_EQ(summary.quantized, std::string(spec) == "fp16" ? 0 : 2 * (4 + 4 * 3)) << spec;
    const auto g = qjoule::io::read_gguf(out);
    EXPECT_EQ(g.metadata.at("llama.expert_count"), 4);
    EXPECT_EQ(g.metadata.at("llama.expert_used_count"), 2);
    EXPECT_EQ(g.metadata.at("llama.feed_forward_length"), 32);
    const auto& router = g.tensors.at("blk.1.ffn_gate_inp.weight");
    EXPECT_EQ(router.type, GgmlType::f32) << spec << ": qjoule runs the router in FP32";
    EXPECT_EQ(router.ne, (std::vector<int64_t>{32, 4}));
    for (const char* proj : {"gate", "up", "down"}) {
      const auto& t = g.tensors.at(std::string("blk.0.ffn_") + proj + "_exps.weight");
      EXPECT_EQ(t.ne, (std::vector<int64_t>{32, 32, 4})) << proj;
    }
    if (std::string(spec) == "mxfp4") {
      const auto& up = g.tensors.at("blk.1.ffn_up_exps.weight");  // w3
      EXPECT_EQ(up.type, GgmlType::mxfp4);
      for (int64_t e = 0; e < 4; ++e)
        EXPECT_EQ(ggml_decode(up, e),
                  qjoule_fp4(ck.to_f32("model.layers.1.block_sparse_moe.experts." + std::to_string(e) + ".w3.weight"),
                             32, 32, false))
            << "expert " << e;
    }
  }
}

// A Mixtral twice as wide as the fixture (hidden 64, experts of 64: whole NVFP4 blocks), random weights.
fs::path wide_mixtral() {
  const fs::path src = qjoule::test::decoder_fixture("tiny-mixtral"), dir = qjoule::test::temp_dir("gguf_wide_mixtral");
  nlohmann::json c;
  std::ifstream(src / "config.json") >> c;
  c["hidden_size"] = 64;
  c["intermediate_size"] = 64;
  std::ofstream(dir / "config.json") << c.dump(2);
  fs::copy_file(src / "tokenizer.json", dir / "tokenizer.json");
  const auto ck = qjoule::io::Checkpoint::open(src);
  std::vector<std::vector<float>> values;
  std::vector<qjoule::io::TensorToWrite> tensors;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (const auto& [name, t] : ck.tensors()) {
    std::vector<int64_t> shape = t.shape;
    for (int64_t& d : shape)
      if (d == 32 || d == 16) d *= 2;  // hidden, FFN, heads · head_dim; not the vocabulary or the experts
    std::size_t n = 1;
    for (const int64_t d : shape) n *= static_cast<std::size_t>(d);
    values.emplace_back(n);
    for (float& v : values.back()) v = shape.size() == 1 ? 1.0f + normal(rng) : normal(rng);
    tensors.push_back({name, qjoule::io::DType::F32, shape,
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.back().data()), n * 4)});
  }
  qjoule::io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(GgufExportMoe, Nvfp4ExpertsCarryOneTensorScaleEach) {
  const auto src = wide_mixtral();
  const auto ck = qjoule::io::Checkpoint::open(src);
  const auto out = qjoule::test::temp_dir("gguf_wide_mixtral_out") / "m.gguf";
  qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("nvfp4"), out);
  const auto g = qjoule::io::read_gguf(out);
  const auto& down = g.tensors.at("blk.0.ffn_down_exps.weight");  // w2
  EXPECT_EQ(down.type, GgmlType::nvfp4);
  EXPECT_EQ(g.tensors.at("blk.0.ffn_down_exps.scale").ne, (std::vector<int64_t>{4}));
  for (int64_t e = 0; e < 4; ++e) {
    const auto want = qjoule_fp4(
        ck.to_f32("model.layers.0.block_sparse_moe.experts." + std::to_string(e) + ".w2.weight"), 64, 64, true);
    const auto got = ggml_decode(down, e, scale_of(g, "blk.0.ffn_down_exps.scale", e));
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * 1.2e-7f) << "expert " << e << " weight " << i;
  }
  EXPECT_EQ(g.tensors.at("blk.0.attn_q.scale").ne, (std::vector<int64_t>{1}));
}

TEST(GgufExportMoe, ReadBackRunsBitForBitWhatTheOriginalRuns) {
  for (const auto& [fixture, spec] : std::vector<std::pair<std::string, std::string>>{
           {"tiny-mixtral", "int4:g=32:sym"}, {"tiny-mixtral", "fp32"}, {"tiny-olmoe", "fp32"}}) {
    const auto src = qjoule::test::decoder_fixture(fixture);
    const auto dir = qjoule::test::temp_dir("gguf_moe_back_" + fixture + spec.substr(0, 4));
    const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec(spec), dir / "m.gguf");
    if (fixture == "tiny-olmoe") {
      EXPECT_EQ(summary.architecture, "olmoe");
      const auto g = qjoule::io::read_gguf(dir / "m.gguf");
      EXPECT_EQ(g.tensors.count("output.weight"), 1u) << "llama.cpp's olmoe reads no tied head";
      EXPECT_EQ(g.tensors.at("blk.0.attn_k_norm.weight").ne, (std::vector<int64_t>{32}));
      EXPECT_EQ(g.tensors.at("blk.0.ffn_down_exps.weight").ne, (std::vector<int64_t>{24, 32, 4}));
    }
    qjoule::model::import_gguf(dir / "m.gguf", dir / "back");
    const auto factory = qjoule::test::precision_factory(spec);
    const auto a = qjoule::test::prompt_logits(qjoule::model::load_decoder_lm(dir / "back", factory));
    const auto b = qjoule::test::prompt_logits(qjoule::model::load_decoder_lm(src, factory));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << fixture << " " << spec;
  }
}

// tiny-olmoe with 2 key-value heads of 4: K and V's first 16 rows, k_norm's first 16 values.
fs::path olmoe_with_gqa() {
  const fs::path dir = qjoule::test::edited_decoder_copy("tiny-olmoe", "gguf_olmoe_gqa",
                                                         [](nlohmann::json& c) { c["num_key_value_heads"] = 2; });
  const auto ck = qjoule::io::Checkpoint::open(qjoule::test::decoder_fixture("tiny-olmoe"));
  std::vector<std::vector<float>> values;
  std::vector<qjoule::io::TensorToWrite> tensors;
  for (const auto& [name, t] : ck.tensors()) {
    values.push_back(ck.to_f32(name));
    std::vector<int64_t> shape = t.shape;
    if (name.find(".k_proj.") != std::string::npos || name.find(".v_proj.") != std::string::npos ||
        name.find(".k_norm.") != std::string::npos) {
      shape[0] = 16;
      values.back().resize(static_cast<std::size_t>(16 * (shape.size() == 2 ? shape[1] : 1)));
    }
    tensors.push_back({name, qjoule::io::DType::F32, shape,
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.back().data()),
                                                  values.back().size() * 4)});
  }
  fs::remove(dir / "model.safetensors");
  qjoule::io::write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(GgufExportMoe, WhatLlamaCppWouldRunOtherwiseIsOneLine) {
  const auto dir = qjoule::test::temp_dir("gguf_moe_refusals");
  const auto refusal = [&](const fs::path& model, const char* spec = "fp32") {
    return error_of([&] { qjoule::model::export_gguf(model, qjoule::quant::parse_format_spec(spec), dir / "x.gguf"); });
  };
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-qwen3-moe")),
              HasSubstr("config.json: --to gguf: layer 1 has a dense MLP (mlp_only_layers / decoder_sparse_step), and "
                        "llama.cpp's qwen3moe has experts in every layer"));
  EXPECT_THAT(refusal(qjoule::test::edited_decoder_copy("tiny-qwen3-moe", "gguf_qwen3moe_norm",
                                                        [](nlohmann::json& c) {
                                                          c["mlp_only_layers"] = nlohmann::json::array();
                                                          c["norm_topk_prob"] = false;
                                                        })),
              HasSubstr("--to gguf: norm_topk_prob = false, and llama.cpp's qwen3moe always renormalises the chosen "
                        "experts' weights"));
  EXPECT_THAT(refusal(qjoule::test::edited_decoder_copy("tiny-olmoe", "gguf_olmoe_norm",
                                                        [](nlohmann::json& c) { c["norm_topk_prob"] = true; })),
              HasSubstr("--to gguf: norm_topk_prob = true, and llama.cpp's olmoe never renormalises the chosen "
                        "experts' weights"));
  EXPECT_THAT(refusal(olmoe_with_gqa()),
              HasSubstr("--to gguf: 2 key-value heads of 4, and llama.cpp's olmoe reads a k_norm as wide as the "
                        "hidden size"));
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-olmoe"), "mxfp4"),
              HasSubstr("tensor 'model.layers.0.mlp.experts.0.down_proj.weight' is [32, 24]: MXFP4 holds rows of whole "
                        "blocks of 32 weights"));
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-mixtral"), "nvfp4"),
              HasSubstr("is [32, 32]: NVFP4 holds rows of whole blocks of 64 weights"));
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

// A 3-D tensor whose name is not a stacked expert projection (another tool's, or a damaged file): one line.
TEST(GgufImportMoe, A3dTensorThatIsNoMixturesExpertsIsOneLine) {
  const auto dir = qjoule::test::temp_dir("gguf_import_3d");
  qjoule::model::export_gguf(qjoule::test::decoder_fixture("tiny-mixtral"), qjoule::quant::parse_format_spec("fp16"),
                             dir / "m.gguf");
  std::string bytes(static_cast<std::size_t>(fs::file_size(dir / "m.gguf")), '\0');
  std::ifstream(dir / "m.gguf", std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  for (auto at = bytes.find("ffn_up_exps"); at != std::string::npos; at = bytes.find("ffn_up_exps", at))
    bytes.replace(at, 11, "ffn_up_expz");
  std::ofstream(dir / "other.gguf", std::ios::binary) << bytes;
  EXPECT_THAT(error_of([&] { qjoule::model::import_gguf(dir / "other.gguf", dir / "back"); }),
              HasSubstr("other.gguf: tensor 'blk.0.ffn_up_expz.weight' has 3 dimensions and is not a mixture's "
                        "experts"));
}

}  // namespace

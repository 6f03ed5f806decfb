// `qjoule export --to gguf` (model/export/gguf_export.h), read back with io::read_gguf: the metadata llama.cpp
// needs, llama.cpp's tensor names and shapes, Q4_0 blocks that are qjoule's own int4:g=32:sym codes and
// scales bit for bit (Llama's Q and K rows permuted as llama.cpp's converter does, Qwen2's not), the
// tokenizer, and one-line refusals before anything is written; and the file read back into a Hugging
// Face folder (model/export/gguf_import.h) runs bit for bit what int4:g=32:sym runs on the original.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decoder_fixtures.h"
#include "error_of.h"
#include "qjoule/io/gguf.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/export/gguf_export.h"
#include "qjoule/model/export/gguf_import.h"
#include "qjoule/quant/quantize_int4.h"
#include "prequantized/quantized_checkpoint_test_util.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::error_of;
using ::testing::HasSubstr;

// Q4_0 of `w` [rows, cols] as qjoule's int4:g=32:sym codes, with the rows taken in `order`.
std::vector<uint8_t> expected_q4_0(const std::vector<float>& w, int64_t rows, int64_t cols,
                                   const std::vector<int64_t>& order) {
  std::vector<float> permuted(w.size());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(permuted.data() + r * cols, w.data() + order[static_cast<std::size_t>(r)] * cols, cols * sizeof(float));
  const auto m = qjoule::quant::quantize_matrix_int4<qjoule::quant::BlockInt4Sym<32>>(permuted.data(), rows, cols, "w");
  std::vector<uint8_t> out;
  for (const auto& b : m.blocks) {
    const auto* d = reinterpret_cast<const uint8_t*>(&b.d);
    out.push_back(d[0]);
    out.push_back(d[1]);
    for (int j = 0; j < 16; ++j)
      out.push_back(
          static_cast<uint8_t>(qjoule::quant::int4_nibble(b.qs, j) | (qjoule::quant::int4_nibble(b.qs, j + 16) << 4)));
  }
  return out;
}

// llama.cpp's converter's permutation, as a row order: GGUF row h·d + 2i + j is Hugging Face row h·d + j·d/2 + i.
std::vector<int64_t> rope_interleaved_order(int64_t heads, int64_t rows) {
  std::vector<int64_t> order(static_cast<std::size_t>(rows));
  const int64_t d = rows / heads;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int64_t j = 0; j < 2; ++j) order[static_cast<std::size_t>(h * d + 2 * i + j)] = h * d + j * (d / 2) + i;
  return order;
}

std::vector<int64_t> identity_order(int64_t rows) {
  std::vector<int64_t> order(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) order[static_cast<std::size_t>(r)] = r;
  return order;
}

TEST(GgufExport, Q4_0IsQjoulesInt4G32SymBitForBitUnderLlamaCppsNames) {
  for (const std::string fixture : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    const auto src = qjoule::test::decoder_fixture(fixture);
    const auto out = qjoule::test::temp_dir("gguf_" + fixture) / "model.gguf";
    const auto summary = qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("int4:g=32:sym"), out);
    EXPECT_EQ(summary.quantized, 14);
    EXPECT_EQ(summary.tensor_type, "Q4_0");
    const auto g = qjoule::io::read_gguf(out);
    const std::string arch = fixture == "tiny-llama" ? "llama" : fixture == "tiny-qwen2" ? "qwen2" : "qwen3";
    EXPECT_EQ(g.metadata.at("general.architecture"), arch);
    EXPECT_EQ(g.metadata.at(arch + ".block_count"), 2);
    EXPECT_EQ(g.metadata.at("general.file_type"), 2);  // MOSTLY_Q4_0
    EXPECT_EQ(g.metadata.at("tokenizer.ggml.model"), fixture == "tiny-llama" ? "llama" : "gpt2");
    const auto ck = qjoule::io::Checkpoint::open(src);
    const int64_t vocab = ck.at("model.embed_tokens.weight").shape[0];
    EXPECT_EQ(g.metadata.at("tokenizer.ggml.tokens").size(), static_cast<std::size_t>(vocab));
    // Embeddings as stored (tiny-llama BF16, tiny-qwen2 F32): reading the file back gives them exactly.
    const auto embd = ck.at("model.embed_tokens.weight").dtype;
    EXPECT_EQ(g.tensors.at("token_embd.weight").type,
              embd == qjoule::io::DType::BF16 ? qjoule::io::GgmlType::bf16 : qjoule::io::GgmlType::f32);
    EXPECT_EQ(g.tensors.at("blk.1.attn_norm.weight").type, qjoule::io::GgmlType::f32);
    // tiny-llama has llama3 rope scaling (a rope_freqs tensor), tiny-qwen2 Q/K/V biases, tiny-qwen3 per-head
    // norms of q and k (and a head_dim that is not hidden / heads: key_length).
    EXPECT_EQ(g.tensors.count(fixture == "tiny-llama"   ? "rope_freqs.weight"
                              : fixture == "tiny-qwen2" ? "blk.0.attn_q.bias"
                                                        : "blk.1.attn_k_norm.weight"),
              1u);
    if (fixture == "tiny-qwen3") {
      EXPECT_EQ(g.tensors.at("blk.0.attn_q_norm.weight").ne, (std::vector<int64_t>{32}));
      EXPECT_EQ(g.metadata.at("qwen3.attention.key_length"), 32);
    }
    const int64_t heads = g.metadata.at(arch + ".attention.head_count").get<int64_t>();
    const int64_t kv_heads = g.metadata.at(arch + ".attention.head_count_kv").get<int64_t>();
    for (const auto& [hf, gg] : std::vector<std::pair<std::string, std::string>>{
             {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
             {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
             {"model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight"},
             {"model.layers.1.mlp.down_proj.weight", "blk.1.ffn_down.weight"}}) {
      const auto& t = ck.at(hf);
      const auto& q = g.tensors.at(gg);
      EXPECT_EQ(q.type, qjoule::io::GgmlType::q4_0) << gg;
      EXPECT_EQ(q.ne, (std::vector<int64_t>{t.shape[1], t.shape[0]})) << gg;
      const bool permuted =
          arch == "llama" && (gg.find("attn_q") != std::string::npos || gg.find("attn_k") != std::string::npos);
      const auto order =
          permuted ? rope_interleaved_order(gg.find("attn_q") != std::string::npos ? heads : kv_heads, t.shape[0])
                   : identity_order(t.shape[0]);
      const auto expected = expected_q4_0(ck.to_f32(hf), t.shape[0], t.shape[1], order);
      ASSERT_EQ(q.nbytes, expected.size()) << gg;
      EXPECT_EQ(std::memcmp(q.data, expected.data(), expected.size()), 0) << gg << ": bit for bit";
    }
  }
}

TEST(GgufExport, Fp16AndBf16WriteEveryMatrixInThatType) {
  const auto src = qjoule::test::decoder_fixture("tiny-qwen2");
  for (const char* spec : {"fp16", "bf16", "fp32"}) {
    const auto out = qjoule::test::temp_dir(std::string("gguf_plain_") + spec) / "m.gguf";
    qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec(spec), out);
    const auto g = qjoule::io::read_gguf(out);
    const auto type = std::string(spec) == "fp16"   ? qjoule::io::GgmlType::f16
                      : std::string(spec) == "bf16" ? qjoule::io::GgmlType::bf16
                                                    : qjoule::io::GgmlType::f32;
    EXPECT_EQ(g.tensors.at("blk.0.ffn_up.weight").type, type) << spec;
    EXPECT_EQ(g.tensors.at("token_embd.weight").type, type) << spec;
  }
}

TEST(GgufExport, RefusalsAreOneLineBeforeAnythingIsWritten) {
  const auto dir = qjoule::test::temp_dir("gguf_refusals");
  const auto refusal = [&](const fs::path& model, const std::string& spec, const fs::path& out) {
    return error_of([&] { qjoule::model::export_gguf(model, qjoule::quant::parse_format_spec(spec), out); });
  };
  const auto llama = qjoule::test::decoder_fixture("tiny-llama");
  for (const char* spec : {"int4:g=128:sym", "int4:g=32:asym", "nf4", "int8"})
    EXPECT_THAT(refusal(llama, spec, dir / "a.gguf"),
                HasSubstr("--to gguf: no GGUF type holds it bit for bit; qjoule writes int4:g=32:sym (Q4_0), mxfp4 "
                          "(MXFP4), nvfp4 (NVFP4), fp16, bf16, fp32"));
  EXPECT_THAT(refusal(qjoule::test::decoder_fixture("tiny-gpt2"), "fp16", dir / "b.gguf"),
              HasSubstr("GPT-2 is not exported"));
  EXPECT_THAT(refusal(qjoule::test::fixtures_dir() / "tiny-bert", "fp16", dir / "c.gguf"),
              HasSubstr("--to gguf exports a Llama, Mistral, Qwen2, Qwen3, Gemma 3, Phi-3, Mixtral, Qwen3-MoE or OLMoE "
                        "decoder; this model is not one"));
  std::ofstream(dir / "exists.gguf") << "x";
  EXPECT_THAT(refusal(llama, "fp16", dir / "exists.gguf"), HasSubstr("exists; export never overwrites a model"));
  EXPECT_FALSE(fs::exists(dir / "a.gguf") || fs::exists(dir / "b.gguf") || fs::exists(dir / "c.gguf"));
}

// Broken GGUF files: one line naming the file and what was found.
TEST(GgufReader, BrokenFilesAreOneLine) {
  const auto dir = qjoule::test::temp_dir("gguf_broken");
  const auto good = dir / "good.gguf";
  qjoule::model::export_gguf(qjoule::test::decoder_fixture("tiny-qwen2"), qjoule::quant::parse_format_spec("fp16"),
                             good);
  std::string bytes(static_cast<std::size_t>(fs::file_size(good)), '\0');
  std::ifstream(good, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const auto with = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return error_of([&] { qjoule::io::read_gguf(dir / name); });
  };
  EXPECT_THAT(with("magic.gguf", "GGUX" + bytes.substr(4)), HasSubstr("not a GGUF file (magic 0x58554747"));
  std::string v9 = bytes;
  v9[4] = 9;
  EXPECT_THAT(with("version.gguf", v9), HasSubstr("GGUF version 9, expected 2 or 3"));
  EXPECT_THAT(with("truncated.gguf", bytes.substr(0, 200)), HasSubstr("but the file ends at 200"));
  EXPECT_THAT(with("short_data.gguf", bytes.substr(0, bytes.size() - 64)), HasSubstr("runs past the end of the data"));
  // A tensor of 2^40 × 2^40 F32 weights: its byte count would wrap a 64-bit integer to 0.
  std::string huge;
  const auto put = [&](auto v) { huge.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{0x46554747}), put(uint32_t{3}), put(uint64_t{1}), put(uint64_t{0});  // header: 1 tensor, no metadata
  put(uint64_t{1}), huge += "w", put(uint32_t{2}), put(uint64_t{1} << 40), put(uint64_t{1} << 40), put(uint32_t{0}),
      put(uint64_t{0});
  EXPECT_THAT(with("huge.gguf", huge),
              HasSubstr("tensor 'w' has 1099511627776 × 1099511627776 weights, more than 2^48"));
}

TEST(GgufImport, AQ4_0FileReadBackRunsBitForBitQjoulesOwnInt4G32Sym) {
  for (const std::string fixture : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    const auto src = qjoule::test::decoder_fixture(fixture);
    const auto dir = qjoule::test::temp_dir("gguf_back_" + fixture);
    qjoule::model::export_gguf(src, qjoule::quant::parse_format_spec("int4:g=32:sym"), dir / "m.gguf");
    const auto summary = qjoule::model::import_gguf(dir / "m.gguf", dir / "back");
    EXPECT_EQ(summary.q4_0, 14);
    EXPECT_EQ(summary.precision, "int4:g=32:sym");
    const auto factory = qjoule::test::precision_factory("int4:g=32:sym");
    const auto back = qjoule::model::load_decoder_lm(dir / "back", factory);
    const auto own = qjoule::model::load_decoder_lm(src, factory);
    EXPECT_EQ(back.bytes_held(), own.bytes_held());
    const auto a = qjoule::test::prompt_logits(back), b = qjoule::test::prompt_logits(own);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << fixture << ": bit for bit";
  }
}

TEST(GgufImport, OnlyQjoulesOwnExportsAreReadBack) {
  const auto dir = qjoule::test::temp_dir("gguf_back_refusals");
  // The seed of the fuzz target: a GGUF without qjoule's keys (another tool's).
  const auto foreign = qjoule::test::fixtures_dir().parent_path().parent_path() / "fuzz" / "seeds" / "tiny.gguf";
  EXPECT_THAT(error_of([&] { qjoule::model::import_gguf(foreign, dir / "a"); }),
              HasSubstr("no 'qjoule.hf_config_json': a GGUF file that qjoule's export did not write"));
  qjoule::model::export_gguf(qjoule::test::decoder_fixture("tiny-qwen2"), qjoule::quant::parse_format_spec("fp16"),
                             dir / "m.gguf");
  fs::create_directories(dir / "full");
  std::ofstream(dir / "full" / "x") << "x";
  EXPECT_THAT(error_of([&] { qjoule::model::import_gguf(dir / "m.gguf", dir / "full"); }),
              HasSubstr("holds files already; expected a new or empty folder"));
}

}  // namespace

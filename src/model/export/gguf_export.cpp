#include "qjoule/model/export/gguf_export.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/config_reconciler.h"
#include "model/export/gguf_tensor_names.h"
#include "qjoule/error.h"
#include "qjoule/io/output_folder.h"
#include "qjoule/io/gguf.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/quant/element_math.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// llama.cpp's token types (llama_token_type).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// The bytes of every tensor written, owned until the file is.
class Store {
 public:
  template <class T>
  std::span<const std::byte> keep(std::vector<T> values) {
    auto bytes = std::make_unique<std::vector<std::byte>>(values.size() * sizeof(T));
    std::memcpy(bytes->data(), values.data(), bytes->size());
    owned_.push_back(std::move(bytes));
    return {owned_.back()->data(), owned_.back()->size()};
  }

 private:
  std::vector<std::unique_ptr<std::vector<std::byte>>> owned_;
};

// llama.cpp's converter's Q / K permutation: within each head, rows [i] and [i + d/2] (Hugging Face's
// rotate_half pairs) become rows 2i and 2i + 1 (GGUF's interleaved rope). `rows` of `width` values each
// (weights, or a Q4_0 row's bytes).
template <class T>
std::vector<T> permute_rows(const std::vector<T>& w, int64_t heads, int64_t rows, int64_t width) {
  std::vector<T> out(w.size());
  const int64_t hd = rows / heads, half = hd / 2;
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = h * hd + 2 * i + j, from = h * hd + j * half + i;
        std::memcpy(out.data() + to * width, w.data() + from * width, sizeof(T) * static_cast<std::size_t>(width));
      }
  return out;
}

// Q4_0 from qjoule's int4:g=32:sym blocks (round-to-nearest's of some weights, or calibration's): the
// same FP16 scale and codes u = q + 8; qjoule keeps weight 2i in the high nibble of byte i, Q4_0 weight j
// in the low nibble of byte j and weight j + 16 in its high nibble.
std::vector<uint8_t> q4_0_of(const quant::BlockMatrix<quant::BlockInt4Sym<32>>& m) {
  std::vector<uint8_t> out(m.blocks.size() * io::kQ4_0BlockBytes);
  std::size_t at = 0;
  for (const auto& b : m.blocks) {
    std::memcpy(out.data() + at, &b.d, 2);
    for (int j = 0; j < 16; ++j)
      out[at + 2 + static_cast<std::size_t>(j)] =
          static_cast<uint8_t>(quant::int4_nibble(b.qs, j) | (quant::int4_nibble(b.qs, j + 16) << 4));
    at += io::kQ4_0BlockBytes;
  }
  return out;
}

std::vector<uint16_t> bits_of(const std::vector<float>& w, io::GgmlType type) {
  std::vector<uint16_t> out(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    out[i] = type == io::GgmlType::f16 ? quant::fp32_to_fp16_bits(w[i]) : element::f32_to_bf16_bits(w[i]);
  return out;
}

struct Tokenizer {
  std::string model;  // "gpt2" or "llama"
  std::string pre;    // gpt2: llama.cpp's pre-tokenizer ("gpt-2", "llama3", "qwen2", "default")
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;        // llama
  std::vector<std::string> merges;  // gpt2
  std::optional<int32_t> unk;
};

// tokenizer.json's BPE as llama.cpp's vocabulary of `vocab_size` tokens (the rows of the embeddings;
// ids the tokenizer does not name are "[PAD<id>]", unused).
Tokenizer read_tokenizer(const fs::path& dir, int64_t vocab_size) {
  const auto path = dir / "tokenizer.json";
  std::ifstream in(path);
  if (!in)
    fail("{}: not found; GGUF carries the tokenizer, export --to gguf reads it from tokenizer.json", path.string());
  json t;
  try {
    in >> t;
  } catch (const json::exception& e) {
    fail("{}: not JSON ({})", path.string(), e.what());
  }
  const json& model = t.value("model", json::object());
  if (model.value("type", std::string()) != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    fail("{}: model.type is {}, expected a BPE tokenizer with a vocab (GGUF's gpt2 and llama tokenizers)",
         path.string(), model.value("type", json("absent")).dump());
  Tokenizer tok;
  const bool byte_fallback = model.value("byte_fallback", false);
  tok.model = byte_fallback ? "llama" : "gpt2";
  tok.tokens.assign(static_cast<std::size_t>(vocab_size), "");
  tok.types.assign(static_cast<std::size_t>(vocab_size), kUnused);
  const auto set = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id >= vocab_size)
      fail("{}: token '{}' has id {}, outside the model's vocabulary of {}", path.string(), text, id, vocab_size);
    tok.tokens[static_cast<std::size_t>(id)] = text;
    tok.types[static_cast<std::size_t>(id)] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer())
      fail("{}: vocab entry '{}' has id {}, expected an integer", path.string(), text, id.dump());
    const bool byte = byte_fallback && text.size() == 6 && text.starts_with("<0x") && text.ends_with(">");
    set(id.get<int64_t>(), text, byte ? kByte : kNormal);
  }
  if (model.contains("unk_token") && model["unk_token"].is_string() && model["vocab"].contains(model["unk_token"])) {
    tok.unk = model["vocab"][model["unk_token"].get<std::string>()].get<int32_t>();
    tok.types[static_cast<std::size_t>(*tok.unk)] = kUnknown;
  }
  for (const auto& added : t.value("added_tokens", json::array()))
    if (added.contains("id") && added["id"].is_number_integer() && added.contains("content"))
      set(added["id"].get<int64_t>(), added["content"].get<std::string>(),
          added.value("special", false) ? kControl : kUserDefined);
  for (int64_t id = 0; id < vocab_size; ++id)
    if (tok.tokens[static_cast<std::size_t>(id)].empty())
      tok.tokens[static_cast<std::size_t>(id)] = fmt::format("[PAD{}]", id);
  // Merges: "a b" strings, or [a, b] pairs in newer files.
  std::vector<std::string> merges;
  for (const auto& m : model.value("merges", json::array())) {
    if (m.is_string())
      merges.push_back(m.get<std::string>());
    else if (m.is_array() && m.size() == 2)
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    else
      fail("{}: a merge is {}, expected \"a b\" or [a, b]", path.string(), m.dump());
  }
  if (tok.model == "gpt2") {
    tok.merges = std::move(merges);
    // The pre-tokenizer llama.cpp must split text with: GPT-2's regex (ByteLevel's own), Llama 3's (digits
    // in threes), Qwen2's (single digits); "default" otherwise (llama.cpp warns that it guessed).
    const json& pre = t.value("pre_tokenizer", json::object());
    const std::string text = pre.is_null() ? std::string() : pre.dump();
    tok.pre = "default";
    if (pre.is_object() && pre.value("type", std::string()) == "ByteLevel" && pre.value("use_regex", true))
      tok.pre = "gpt-2";
    else if (text.find("\\p{N}{1,3}") != std::string::npos)
      tok.pre = "llama3";
    else if (text.find("|\\p{N}|") != std::string::npos)
      tok.pre = "qwen2";
  } else {
    // SentencePiece scores: the token a merge makes is worth more the earlier the merge (llama.cpp's SPM
    // tokenizer merges the best-scored pair first, as BPE applies merges in rank order).
    tok.scores.assign(static_cast<std::size_t>(vocab_size), 0.0f);
    std::map<std::string, int64_t> id_of;
    for (int64_t id = 0; id < vocab_size; ++id) id_of[tok.tokens[static_cast<std::size_t>(id)]] = id;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const auto space = merges[rank].find(' ');
      if (space == std::string::npos) continue;
      const auto it = id_of.find(merges[rank].substr(0, space) + merges[rank].substr(space + 1));
      if (it != id_of.end() && tok.scores[static_cast<std::size_t>(it->second)] == 0.0f)
        tok.scores[static_cast<std::size_t>(it->second)] = -static_cast<float>(rank + 1);
    }
  }
  return tok;
}

bool is_block_linear(const std::string& hf_name) {
  for (const char* part : {".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.", ".gate_proj.", ".up_proj.", ".down_proj.",
                           ".qkv_proj.", ".gate_up_proj."})
    if (hf_name.find(part) != std::string::npos && hf_name.ends_with(".weight")) return true;
  return false;
}

// The GGUF type of the block Linears for spec; other specs are one line.
io::GgmlType gguf_matrix_type(const quant::FormatSpec& spec) {
  const quant::FormatSpec rtn = quant::round_to_nearest(spec);  // calibrated codes: the same blocks
  if (rtn.format == quant::Format::int4 && rtn.group_size == 32 && !rtn.int4_asymmetric && !rtn.int4_int8_activations &&
      !rtn.emulate)
    return io::GgmlType::q4_0;
  if (rtn.format == quant::Format::fp16 && !rtn.emulate) return io::GgmlType::f16;
  if (rtn.format == quant::Format::bf16 && !rtn.emulate) return io::GgmlType::bf16;
  if (rtn.format == quant::Format::fp32) return io::GgmlType::f32;
  fail("--precision {} --to gguf: no GGUF type holds it bit for bit; qjoule writes {}", quant::to_string(spec),
       kGgufExportableSpecs);
}

struct Checked {
  io::Checkpoint ck;
  DecoderConfig cfg;
  io::GgmlType matrix_type;
  std::string arch;
};

Checked check_export(const fs::path& model, const quant::FormatSpec& spec, const fs::path& out) {
  const io::GgmlType matrix_type = gguf_matrix_type(spec);
  if (fs::exists(out)) fail("--out {}: exists; export never overwrites a model (give a new file name)", out.string());
  const std::string where = (model / "config.json").string();
  if (model_family(model) != ModelFamily::Decoder)
    fail("{}: --to gguf exports a Llama, Mistral, Qwen2, Qwen3, Gemma 3 or Phi-3 decoder; this model is not one",
         where);
  auto ck = io::Checkpoint::open(model);
  DecoderConfig cfg = load_decoder_config(model, ck);
  if (cfg.quantization)
    fail("{}: the model is pre-quantized already ({}); export reads an unquantized FP32, FP16 or BF16 checkpoint",
         where, cfg.quantization->describe());
  if (cfg.arch == DecoderArch::Gpt2)
    fail("{}: --to gguf: GPT-2 is not exported yet (Llama, Mistral, Qwen2, Qwen3, Gemma 3 and Phi-3 are)", where);
  if (cfg.moe.num_experts > 0)
    fail(
        "{}: --to gguf: {} (a mixture of experts) is not exported yet (Llama, Mistral, Qwen2, Qwen3, Gemma 3 and "
        "Phi-3 are)",
        where, cfg.architecture);
  const bool gemma3 = cfg.arch == DecoderArch::Gemma3, phi3 = cfg.arch == DecoderArch::Phi3;
  // Gemma 3's windows are written (one sliding_window, which layers have it); no other llama.cpp
  // architecture qjoule writes reads one.
  if (!cfg.layer_window.empty() && !gemma3)
    fail(
        "{}: --to gguf: sliding_window = {} is below the {} positions, and llama.cpp's {} attends to every "
        "position (Gemma 3's windows are exported)",
        where, *std::max_element(cfg.layer_window.begin(), cfg.layer_window.end()), cfg.max_positions,
        phi3 ? "phi3" : "llama");
  // llama.cpp's gemma3 scales the queries by 1/sqrt(head_dim) (its 27B by 1/sqrt(hidden / heads)).
  if (gemma3 && cfg.attention_scale > 0.0f &&
      std::abs(cfg.attention_scale * std::sqrt(static_cast<float>(cfg.head_dim)) - 1.0f) > 1e-6f)
    fail(
        "{}: --to gguf: query_pre_attn_scalar = {:.6g} scales queries by its 1/sqrt, and llama.cpp's gemma3 by "
        "1/sqrt(head_dim = {}); expected query_pre_attn_scalar = head_dim",
        where, 1.0 / (double(cfg.attention_scale) * double(cfg.attention_scale)), cfg.head_dim);
  const auto& rs = cfg.rope_scaling;
  const bool rope_ok = rs.type == "default" || (rs.type == "llama3" && !gemma3 && !phi3) ||
                       (rs.type == "linear" && !phi3) || (rs.type == "longrope" && phi3);
  if (!rope_ok)
    fail("{}: rope_scaling type '{}' has no GGUF form qjoule writes for {} (default{})", where, rs.type,
         cfg.architecture,
         gemma3 ? " and linear"
         : phi3 ? " and longrope"
                : ", linear and llama3");
  if (matrix_type == io::GgmlType::q4_0)
    for (const auto& [name, t] : ck.tensors())
      if (is_block_linear(name) && t.shape.size() == 2 && t.shape[1] % io::kQ4_0Block != 0)
        fail("{}: tensor '{}' is {}: Q4_0 holds rows of whole blocks of 32 weights", t.file.string(), name,
             t.shape_string());
  std::string arch = cfg.arch == DecoderArch::Qwen2   ? "qwen2"
                     : cfg.arch == DecoderArch::Qwen3 ? "qwen3"
                     : gemma3                         ? "gemma3"
                     : phi3                           ? "phi3"
                                                      : "llama";
  return {std::move(ck), std::move(cfg), matrix_type, std::move(arch)};
}

}  // namespace

void check_gguf_export(const fs::path& model, const quant::FormatSpec& spec, const fs::path& out) {
  (void)check_export(model, spec, out);
}

GgufExportSummary export_gguf(const fs::path& model, const quant::FormatSpec& spec, const fs::path& out,
                              const std::function<void(int64_t, int64_t, const std::string&)>& progress,
                              const CalibratedInt4* calibrated) {
  if (quant::needs_calibration(spec) && calibrated == nullptr)
    fail("--precision {}: {}'s codes come from calibration; expected --calib FILE (or {}, round-to-nearest)",
         quant::to_string(spec), quant::calibration_method(spec), quant::to_string(quant::round_to_nearest(spec)));
  const auto [ck, cfg, matrix_type, arch] = check_export(model, spec, out);
  const bool q4_0 = matrix_type == io::GgmlType::q4_0;
  const auto& rs = cfg.rope_scaling;
  const Tokenizer tok = read_tokenizer(model, cfg.vocab_size);

  io::GgufWriter w;
  GgufExportSummary summary;
  summary.architecture = arch;
  summary.tensor_type = io::ggml_type_name(matrix_type);
  summary.tokenizer = tok.model;
  w.add_string("general.architecture", arch);
  w.add_string("general.name",
               model.filename().empty() ? model.parent_path().filename().string() : model.filename().string());
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_BF16 32.
  w.add_u32("general.file_type", q4_0                                ? 2
                                 : matrix_type == io::GgmlType::f16  ? 1
                                 : matrix_type == io::GgmlType::bf16 ? 32
                                                                     : 0);
  w.add_u32(arch + ".context_length", static_cast<uint32_t>(cfg.max_positions));
  w.add_u32(arch + ".embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  w.add_u32(arch + ".block_count", static_cast<uint32_t>(cfg.num_layers));
  w.add_u32(arch + ".feed_forward_length", static_cast<uint32_t>(cfg.intermediate_size));
  w.add_u32(arch + ".attention.head_count", static_cast<uint32_t>(cfg.num_heads));
  w.add_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(cfg.num_kv_heads));
  w.add_f32(arch + ".attention.layer_norm_rms_epsilon", cfg.norm_eps);
  w.add_f32(arch + ".rope.freq_base", static_cast<float>(cfg.rope_theta));
  const int64_t rotary = cfg.rotary_dim > 0 ? cfg.rotary_dim : cfg.head_dim;  // Phi-3: partial_rotary_factor
  w.add_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(rotary));
  if (cfg.head_dim * cfg.num_heads != cfg.hidden_size) {
    w.add_u32(arch + ".attention.key_length", static_cast<uint32_t>(cfg.head_dim));
    w.add_u32(arch + ".attention.value_length", static_cast<uint32_t>(cfg.head_dim));
  }
  w.add_u32(arch + ".vocab_size", static_cast<uint32_t>(cfg.vocab_size));
  if (arch == "gemma3" && !cfg.layer_window.empty()) {  // the window, which layers have it, their RoPE base
    std::vector<bool> windowed;
    for (const int64_t window : cfg.layer_window) windowed.push_back(window > 0);
    w.add_u32(arch + ".attention.sliding_window",
              static_cast<uint32_t>(*std::max_element(cfg.layer_window.begin(), cfg.layer_window.end())));
    w.add_bools(arch + ".attention.sliding_window_pattern", windowed);
    if (cfg.local_rope_theta > 0.0) w.add_f32(arch + ".rope.freq_base_swa", static_cast<float>(cfg.local_rope_theta));
  }
  if (arch == "phi3") {  // LongRoPE: its factors as tensors (below), the switch and the attention factor here
    w.add_u32(arch + ".attention.sliding_window", 0);
    if (rs.type == "longrope") {
      w.add_u32(arch + ".rope.scaling.original_context_length",
                static_cast<uint32_t>(rs.original_max_position_embeddings));
      w.add_f32(arch + ".rope.scaling.attn_factor",
                kernels::make_rope_table(rotary, cfg.rope_theta, rs).attention_factor);
    }
  }
  if (rs.type == "linear") {
    w.add_string(arch + ".rope.scaling.type", "linear");
    w.add_f32(arch + ".rope.scaling.factor", static_cast<float>(rs.factor));
  }
  w.add_string("tokenizer.ggml.model", tok.model);
  if (tok.model == "gpt2") w.add_string("tokenizer.ggml.pre", tok.pre);
  w.add_strings("tokenizer.ggml.tokens", tok.tokens);
  w.add_i32s("tokenizer.ggml.token_type", tok.types);
  if (tok.model == "llama") w.add_f32s("tokenizer.ggml.scores", tok.scores);
  if (tok.model == "gpt2") w.add_strings("tokenizer.ggml.merges", tok.merges);
  if (cfg.bos_token_id) w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*cfg.bos_token_id));
  if (cfg.eos_token_id) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*cfg.eos_token_id));
  if (tok.unk) w.add_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(*tok.unk));
  w.add_bool("tokenizer.ggml.add_bos_token", tok.model == "llama");
  // qjoule's own keys (llama.cpp ignores them): the Hugging Face config.json and tokenizer.json the file
  // came from, so that `qjoule export --model FILE.gguf` gives the model back exactly (gguf_import.h).
  const auto text_of = [](const fs::path& path) {
    std::string text(static_cast<std::size_t>(fs::file_size(path)), '\0');
    std::ifstream(path, std::ios::binary).read(text.data(), static_cast<std::streamsize>(text.size()));
    return text;
  };
  w.add_string(kGgufConfigKey, text_of(model / "config.json"));
  w.add_string(kGgufTokenizerKey, text_of(model / "tokenizer.json"));

  Store store;
  if (rs.type == "llama3") {
    // rope_freqs: the factor that divides each unscaled frequency (llama.cpp's converter's rope_factors).
    const auto plain = kernels::make_rope_table(cfg.head_dim, cfg.rope_theta, kernels::RopeScaling{});
    const auto scaled = kernels::make_rope_table(cfg.head_dim, cfg.rope_theta, rs);
    std::vector<float> factors(plain.inv_freq.size());
    for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = plain.inv_freq[i] / scaled.inv_freq[i];
    const int64_t n = static_cast<int64_t>(factors.size());
    w.add_tensor("rope_freqs.weight", {n}, io::GgmlType::f32, store.keep(std::move(factors)));
    ++summary.tensors;
  }
  if (rs.type == "longrope") {  // llama.cpp's rope_factors_long / _short: one factor a rotated pair
    const int64_t n = static_cast<int64_t>(rs.long_factor.size());
    w.add_tensor("rope_factors_long.weight", {n}, io::GgmlType::f32,
                 store.keep(std::vector<float>(rs.long_factor.begin(), rs.long_factor.end())));
    w.add_tensor("rope_factors_short.weight", {n}, io::GgmlType::f32,
                 store.keep(std::vector<float>(rs.short_factor.begin(), rs.short_factor.end())));
    summary.tensors += 2;
  }
  const auto total = static_cast<int64_t>(ck.tensors().size());
  int64_t done = 0;
  for (const auto& [stored_name, t] : ck.tensors()) {
    if (progress) progress(++done, total, stored_name);
    // As a CausalLM names it (a Gemma3ForConditionalGeneration's text tensors under language_model.); its
    // vision tower is not llama.cpp's model file.
    const std::string name = stored_name == cfg.lm_head_tensor     ? std::string("lm_head.weight")
                             : stored_name.starts_with(cfg.prefix) ? "model." + stored_name.substr(cfg.prefix.size())
                                                                   : std::string();
    const std::string gname = name.empty() ? std::string() : gguf_tensor_name(name, arch);
    if (gname.empty()) continue;                                             // rotary buffers and the like
    const std::string stem = stored_name.substr(0, stored_name.rfind('.'));  // calibration names it so
    const bool weight = name.ends_with(".weight");
    const bool q_or_k = name.find(".q_proj.") != std::string::npos || name.find(".k_proj.") != std::string::npos;
    const int64_t heads = name.find(".q_proj.") != std::string::npos ? cfg.num_heads : cfg.num_kv_heads;
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());                    // contiguous first
    if (calibrated != nullptr && weight && calibrated->codes.count(stem) != 0) {  // calibration's codes as they are
      const auto* m = std::get_if<quant::BlockMatrix<quant::BlockInt4Sym<32>>>(&calibrated->codes.at(stem));
      if (m == nullptr) fail("{}: its calibrated codes are not int4:g=32:sym blocks, which Q4_0 holds", stem);
      auto bytes = q4_0_of(*m);
      if (arch == "llama" && q_or_k)
        bytes = permute_rows(bytes, heads, t.shape[0], static_cast<int64_t>(bytes.size()) / t.shape[0]);
      w.add_tensor(gname, ne, io::GgmlType::q4_0, store.keep(std::move(bytes)));
      ++summary.quantized;
      ++summary.tensors;
      continue;
    }
    // AWQ's changes: a bias with O's scales folded into V's rows, a norm with Q/K/V's or gate/up's.
    std::vector<float> values;
    if (calibrated != nullptr && !weight && calibrated->biases.count(stem) != 0) {
      values = calibrated->biases.at(stem);
    } else if (calibrated != nullptr && weight && calibrated->norms.count(stem) != 0) {
      values = calibrated->norms.at(stem).gamma;
    } else {
      values = ck.to_f32(stored_name);
      if (cfg.norm_offset_one && t.shape.size() == 1 && name.ends_with("norm.weight"))
        for (float& g : values) g = 1.0f + g;  // Gemma's (1 + w), as qjoule applies it: llama.cpp multiplies by w
    }
    ck.release(stored_name);
    if (arch == "llama" && q_or_k)
      values = permute_rows(values, heads, t.shape[0], t.shape.size() == 2 ? t.shape[1] : 1);
    if (t.shape.size() == 1) {
      w.add_tensor(gname, ne, io::GgmlType::f32, store.keep(std::move(values)));
    } else if (q4_0 && is_block_linear(name)) {
      w.add_tensor(gname, ne, io::GgmlType::q4_0,
                   store.keep(q4_0_of(quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(values.data(), t.shape[0],
                                                                                           t.shape[1], name))));
      ++summary.quantized;
    } else {
      // Q4_0 files: the other matrices (embeddings, lm_head) as stored (F16, BF16 or F32), so that reading
      // the file back gives the model qjoule's own int4:g=32:sym runs, bit for bit.
      const io::GgmlType type = !q4_0                        ? matrix_type
                                : t.dtype == io::DType::F16  ? io::GgmlType::f16
                                : t.dtype == io::DType::BF16 ? io::GgmlType::bf16
                                                             : io::GgmlType::f32;
      if (type == io::GgmlType::f32)
        w.add_tensor(gname, ne, type, store.keep(std::move(values)));
      else
        w.add_tensor(gname, ne, type, store.keep(bits_of(values, type)));
    }
    ++summary.tensors;
  }
  if (out.has_parent_path()) io::create_output_folder(out.parent_path(), "--out");
  w.write(out);
  summary.bytes = fs::file_size(out);
  return summary;
}

}  // namespace qjoule::model

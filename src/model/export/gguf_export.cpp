#include "qjoule/model/export/gguf_export.h"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/config_reconciler.h"
#include "model/export/gguf_blocks.h"
#include "model/export/gguf_tensor_names.h"
#include "model/export/gguf_tokenizer.h"
#include "qjoule/error.h"
#include "qjoule/io/output_folder.h"
#include "qjoule/io/gguf.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/quant/element_math.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_fp4.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A matrix as GGUF holds it: its type, its bytes and (NVFP4) the FP32 tensor scale written beside it.
struct Encoded {
  io::GgmlType type = io::GgmlType::f32;
  std::vector<uint8_t> bytes;
  float tensor_scale = 1.0f;
};

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

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

std::vector<uint16_t> bits_of(const std::vector<float>& w, io::GgmlType type) {
  std::vector<uint16_t> out(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    out[i] = type == io::GgmlType::f16 ? quant::fp32_to_fp16_bits(w[i]) : element::f32_to_bf16_bits(w[i]);
  return out;
}

// The parts qjoule runs as one Linear (Q | K | V, gate | up; decoder_lm's build_fused), `hf` among them, or
// `hf` alone.
std::vector<std::string> fused_parts(const std::string& hf) {
  static const std::vector<std::vector<std::string>> kGroups = {
      {".self_attn.q_proj.weight", ".self_attn.k_proj.weight", ".self_attn.v_proj.weight"},
      {".gate_proj.weight", ".up_proj.weight"},  // dense, and Qwen3-MoE's and OLMoE's experts
      {".w1.weight", ".w3.weight"}};             // Mixtral's experts' gate and up
  for (const auto& group : kGroups)
    for (const std::string& suffix : group)
      if (hf.ends_with(suffix)) {
        const std::string base = hf.substr(0, hf.size() - suffix.size());
        std::vector<std::string> parts;
        for (const std::string& other : group) parts.push_back(base + other);
        return parts;
      }
  return {hf};
}

// The Linears the run's format quantizes: attention's, the MLP's and every expert's (not a mixture's router).
bool is_block_linear(const std::string& hf_name) {
  for (const char* part : {".q_proj.", ".k_proj.", ".v_proj.", ".o_proj.", ".gate_proj.", ".up_proj.", ".down_proj.",
                           ".qkv_proj.", ".gate_up_proj.", ".experts."})
    if (hf_name.find(part) != std::string::npos && hf_name.ends_with(".weight")) return true;
  return false;
}

// The GGUF type of the block Linears for spec; other specs are one line.
io::GgmlType gguf_matrix_type(const quant::FormatSpec& spec) {
  const quant::FormatSpec rtn = quant::round_to_nearest(spec);  // calibrated codes: the same blocks
  if (rtn.format == quant::Format::int4 && rtn.group_size == 32 && !rtn.int4_asymmetric && !rtn.int4_int8_activations &&
      !rtn.emulate)
    return io::GgmlType::q4_0;
  if (rtn.format == quant::Format::mxfp4 && !rtn.emulate) return io::GgmlType::mxfp4;
  if (rtn.format == quant::Format::nvfp4 && !rtn.emulate) return io::GgmlType::nvfp4;
  if (rtn.format == quant::Format::fp16 && !rtn.emulate) return io::GgmlType::f16;
  if (rtn.format == quant::Format::bf16 && !rtn.emulate) return io::GgmlType::bf16;
  if (rtn.format == quant::Format::fp32) return io::GgmlType::f32;
  fail("--precision {} --to gguf: no GGUF type holds it bit for bit; qjoule writes {}", quant::to_string(spec),
       kGgufExportableSpecs);
}

// A mixture as llama.cpp's llama (Mixtral), qwen3moe and olmoe run it: experts in every layer, the chosen
// weights renormalised (llama, qwen3moe) or not (olmoe), OLMoE's k_norm as wide as its q_norm.
void check_mixture(const DecoderConfig& cfg, const std::string& where) {
  if (cfg.moe.num_experts == 0) return;
  const bool olmoe = cfg.arch == DecoderArch::Olmoe;
  const char* arch = olmoe ? "olmoe" : cfg.arch == DecoderArch::Qwen3Moe ? "qwen3moe" : "llama";
  for (int64_t layer = 0; layer < cfg.num_layers; ++layer)
    if (!cfg.moe_layer(layer))
      fail(
          "{}: --to gguf: layer {} has a dense MLP (mlp_only_layers / decoder_sparse_step), and llama.cpp's {} has "
          "experts in every layer",
          where, layer, arch);
  if (cfg.moe.normalize_top_k == olmoe)
    fail("{}: --to gguf: norm_topk_prob = {}, and llama.cpp's {} {} the chosen experts' weights", where,
         cfg.moe.normalize_top_k, arch, olmoe ? "never renormalises" : "always renormalises");
  if (olmoe && cfg.num_kv_heads != cfg.num_heads)
    fail("{}: --to gguf: {} key-value heads of {}, and llama.cpp's olmoe reads a k_norm as wide as the hidden size",
         where, cfg.num_kv_heads, cfg.num_heads);
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
    fail(
        "{}: --to gguf exports a Llama, Mistral, Qwen2, Qwen3, Gemma 3, Phi-3, Mixtral, Qwen3-MoE or OLMoE decoder; "
        "this model is not one",
        where);
  auto ck = io::Checkpoint::open(model);
  DecoderConfig cfg = load_decoder_config(model, ck);
  if (cfg.quantization)
    fail("{}: the model is pre-quantized already ({}); export reads an unquantized FP32, FP16 or BF16 checkpoint",
         where, cfg.quantization->describe());
  if (cfg.arch == DecoderArch::Gpt2)
    fail("{}: --to gguf: GPT-2 is not exported yet (Llama, Mistral, Qwen2, Qwen3, Gemma 3 and Phi-3 are)", where);
  check_mixture(cfg, where);
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
  if (const int64_t block = io::ggml_block_size(matrix_type); block > 1)
    for (const auto& [name, t] : ck.tensors())
      if (is_block_linear(name) && t.shape.size() == 2 && t.shape[1] % block != 0)
        fail("{}: tensor '{}' is {}: {} holds rows of whole blocks of {} weights", t.file.string(), name,
             t.shape_string(), io::ggml_type_name(matrix_type), block);
  std::string arch = cfg.arch == DecoderArch::Qwen2      ? "qwen2"
                     : cfg.arch == DecoderArch::Qwen3    ? "qwen3"
                     : cfg.arch == DecoderArch::Qwen3Moe ? "qwen3moe"
                     : cfg.arch == DecoderArch::Olmoe    ? "olmoe"
                     : gemma3                            ? "gemma3"
                     : phi3                              ? "phi3"
                                                         : "llama";  // Llama, Mistral, Mixtral
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
  const bool quantized = io::ggml_block_size(matrix_type) > 1;
  const auto& rs = cfg.rope_scaling;
  const GgufTokenizer tok = read_gguf_tokenizer(model, cfg.vocab_size);

  io::GgufWriter w;
  GgufExportSummary summary;
  summary.architecture = arch;
  summary.tensor_type = io::ggml_type_name(matrix_type);
  summary.tokenizer = tok.model;
  w.add_string("general.architecture", arch);
  w.add_string("general.name",
               model.filename().empty() ? model.parent_path().filename().string() : model.filename().string());
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_BF16 32, MOSTLY_MXFP4_MOE 38, MOSTLY_NVFP4 39.
  w.add_u32("general.file_type", matrix_type == io::GgmlType::q4_0    ? 2
                                 : matrix_type == io::GgmlType::f16   ? 1
                                 : matrix_type == io::GgmlType::bf16  ? 32
                                 : matrix_type == io::GgmlType::mxfp4 ? 38
                                 : matrix_type == io::GgmlType::nvfp4 ? 39
                                                                      : 0);
  w.add_u32(arch + ".context_length", static_cast<uint32_t>(cfg.max_positions));
  w.add_u32(arch + ".embedding_length", static_cast<uint32_t>(cfg.hidden_size));
  w.add_u32(arch + ".block_count", static_cast<uint32_t>(cfg.num_layers));
  // A mixture: its experts' width (Qwen3-MoE's dense width beside it), how many, how many a token reads.
  const int64_t expert_ffn =
      cfg.moe.expert_intermediate_size > 0 ? cfg.moe.expert_intermediate_size : cfg.intermediate_size;
  w.add_u32(arch + ".feed_forward_length",
            static_cast<uint32_t>(cfg.moe.num_experts > 0 && arch != "qwen3moe" ? expert_ffn : cfg.intermediate_size));
  if (cfg.moe.num_experts > 0) {
    w.add_u32(arch + ".expert_count", static_cast<uint32_t>(cfg.moe.num_experts));
    w.add_u32(arch + ".expert_used_count", static_cast<uint32_t>(cfg.moe.experts_per_token));
    if (arch == "qwen3moe") w.add_u32(arch + ".expert_feed_forward_length", static_cast<uint32_t>(expert_ffn));
  }
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
  // NVFP4's tensor scale of a Linear as qjoule runs it: the fused parts' one (formats.h), each part's GGUF tensor
  // carrying it.
  std::map<std::string, float> fused_scales;
  const auto nvfp4_scale = [&](const std::string& hf, const std::vector<float>& values) {
    const auto parts = fused_parts(hf);
    if (parts.size() == 1) return quant::nvfp4_tensor_scale(values.data(), static_cast<int64_t>(values.size()));
    if (const auto it = fused_scales.find(parts.front()); it != fused_scales.end()) return it->second;
    std::vector<float> all;
    for (const std::string& part : parts) {
      const auto part_values = ck.to_f32(cfg.prefix + part.substr(std::string("model.").size()));
      all.insert(all.end(), part_values.begin(), part_values.end());
    }
    return fused_scales[parts.front()] = quant::nvfp4_tensor_scale(all.data(), static_cast<int64_t>(all.size()));
  };
  // One matrix in the file's type for it: the run's format for the block Linears, the others as stored in a
  // quantized file (so that reading it back gives the model qjoule's own format runs, bit for bit) or in
  // the file's type; a mixture's router F32 always (qjoule keeps it FP32).
  const auto encode = [&](std::vector<float> values, const io::TensorView& t, const std::string& name) {
    Encoded e;
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const bool router = name.ends_with(".gate.weight");
    e.type = quantized && is_block_linear(name) ? matrix_type
             : router                           ? io::GgmlType::f32
             : !quantized                       ? matrix_type
             : t.dtype == io::DType::F16        ? io::GgmlType::f16
             : t.dtype == io::DType::BF16       ? io::GgmlType::bf16
                                                : io::GgmlType::f32;
    switch (e.type) {
      case io::GgmlType::q4_0:
        e.bytes = as_bytes(
            ggml_q4_0_of(quant::quantize_matrix_int4<quant::BlockInt4Sym<32>>(values.data(), rows, cols, name)));
        break;
      case io::GgmlType::mxfp4:
        e.bytes = as_bytes(ggml_mxfp4_of(quant::quantize_matrix_mxfp4(values.data(), rows, cols, name)));
        break;
      case io::GgmlType::nvfp4: {
        const auto m = quant::quantize_matrix_nvfp4(values.data(), rows, cols, name, nvfp4_scale(name, values));
        e.bytes = as_bytes(ggml_nvfp4_of(m, name));
        e.tensor_scale = m.tensor_scale;
        break;
      }
      case io::GgmlType::f32: e.bytes = as_bytes(values); break;
      default: e.bytes = as_bytes(bits_of(values, e.type));
    }
    return e;
  };
  // Calibration's int4:g=32:sym codes of a Linear as they are (Q4_0), nullopt where it has none.
  const auto calibrated_codes = [&](const std::string& stem) -> std::optional<Encoded> {
    if (calibrated == nullptr || calibrated->codes.count(stem) == 0) return std::nullopt;
    const auto* m = std::get_if<quant::BlockMatrix<quant::BlockInt4Sym<32>>>(&calibrated->codes.at(stem));
    if (m == nullptr) fail("{}: its calibrated codes are not int4:g=32:sym blocks, which Q4_0 holds", stem);
    return Encoded{io::GgmlType::q4_0, as_bytes(ggml_q4_0_of(*m)), 1.0f};
  };
  const auto add = [&](const std::string& gname, std::vector<int64_t> ne, Encoded e, std::vector<float> scales) {
    const int64_t linears = ne.size() == 3 ? ne[2] : 1;  // a stacked tensor: its experts
    w.add_tensor(gname, std::move(ne), e.type, store.keep(std::move(e.bytes)));
    ++summary.tensors;
    if (io::ggml_block_size(e.type) > 1) summary.quantized += linears;
    if (e.type == io::GgmlType::nvfp4) {  // the tensor scale(s) beside it, as llama.cpp reads them
      const int64_t n = static_cast<int64_t>(scales.size());
      w.add_tensor(gname.substr(0, gname.size() - std::string("weight").size()) + "scale", {n}, io::GgmlType::f32,
                   store.keep(std::move(scales)));
      ++summary.tensors;
    }
  };
  // A mixture's experts: one tensor per projection and layer, ne = {in, out, experts}.
  std::set<std::string> stacked;
  const auto add_experts = [&](const std::string& gname) {
    Encoded all;
    std::vector<float> scales;
    std::vector<int64_t> ne;
    for (int64_t e = 0; e < cfg.moe.num_experts; ++e) {
      const std::string hf = *hf_expert_tensor_name(gname, e, arch);
      const std::string stored = cfg.prefix + hf.substr(std::string("model.").size());
      const io::TensorView& t = ck.at(stored);
      auto one = calibrated_codes(stored.substr(0, stored.rfind('.')));
      if (!one) one = encode(ck.to_f32(stored), t, hf);
      ck.release(stored);
      ne = {t.shape[1], t.shape[0], cfg.moe.num_experts};
      all.type = one->type;
      all.bytes.insert(all.bytes.end(), one->bytes.begin(), one->bytes.end());
      scales.push_back(one->tensor_scale);
    }
    add(gname, ne, std::move(all), std::move(scales));
  };
  const auto total = static_cast<int64_t>(ck.tensors().size());
  int64_t done = 0;
  for (const auto& [stored_name, t] : ck.tensors()) {
    if (progress) progress(++done, total, stored_name);
    // As a CausalLM names it (a Gemma3ForConditionalGeneration's text tensors under language_model.); its
    // vision tower is not llama.cpp's model file.
    const std::string name = stored_name == cfg.lm_head_tensor     ? std::string("lm_head.weight")
                             : stored_name.starts_with(cfg.prefix) ? "model." + stored_name.substr(cfg.prefix.size())
                                                                   : std::string();
    if (const auto expert = name.empty() ? std::nullopt : gguf_expert_tensor(name)) {
      if (stacked.insert(expert->gguf).second) add_experts(expert->gguf);
      continue;
    }
    const std::string gname = name.empty() ? std::string() : gguf_tensor_name(name, arch);
    if (gname.empty()) continue;                                             // rotary buffers and the like
    const std::string stem = stored_name.substr(0, stored_name.rfind('.'));  // calibration names it so
    const bool weight = name.ends_with(".weight");
    const bool q_or_k = name.find(".q_proj.") != std::string::npos || name.find(".k_proj.") != std::string::npos;
    const int64_t heads = name.find(".q_proj.") != std::string::npos ? cfg.num_heads : cfg.num_kv_heads;
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());  // contiguous first
    if (auto codes = weight ? calibrated_codes(stem) : std::nullopt) {
      if (arch == "llama" && q_or_k)
        codes->bytes =
            permute_rows(codes->bytes, heads, t.shape[0], static_cast<int64_t>(codes->bytes.size()) / t.shape[0]);
      add(gname, ne, std::move(*codes), {});
      continue;
    }
    // AWQ's changes: a bias with O's scales folded into V's rows, a norm with Q/K/V's or gate/up's.
    std::vector<float> values;
    if (calibrated != nullptr && !weight && calibrated->biases.count(stem) != 0) {
      values = calibrated->biases.at(stem);
    } else if (calibrated != nullptr && weight && calibrated->norms.count(stem) != 0) {
      values = calibrated->norms.at(stem).gamma;
    } else if (calibrated != nullptr && weight && calibrated->fp32_weights.count(stem) != 0) {
      values = calibrated->fp32_weights.at(stem);  // a mixture's router with AWQ's scales in its columns
    } else {
      values = ck.to_f32(stored_name);
      if (cfg.norm_offset_one && t.shape.size() == 1 && name.ends_with("norm.weight"))
        for (float& g : values) g = 1.0f + g;  // Gemma's (1 + w), as qjoule applies it: llama.cpp multiplies by w
    }
    ck.release(stored_name);
    if (arch == "llama" && q_or_k)
      values = permute_rows(values, heads, t.shape[0], t.shape.size() == 2 ? t.shape[1] : 1);
    if (t.shape.size() == 1) {
      add(gname, ne, Encoded{io::GgmlType::f32, as_bytes(values), 1.0f}, {});
      continue;
    }
    Encoded e = encode(std::move(values), t, name);
    const float scale = e.tensor_scale;
    // OLMoE's head is a tensor of its own in llama.cpp's olmoe, tied or not.
    if (gname == "token_embd.weight" && arch == "olmoe" && cfg.tie_word_embeddings) add("output.weight", ne, e, {});
    add(gname, ne, std::move(e), {scale});
  }
  if (out.has_parent_path()) io::create_output_folder(out.parent_path(), "--out");
  w.write(out);
  summary.bytes = fs::file_size(out);
  return summary;
}

}  // namespace qjoule::model

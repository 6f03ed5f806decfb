#include "qjoule/model/decoder_config.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config_reconciler.h"
#include "decoder_moe_config.h"
#include "decoder_rope_config.h"
#include "qjoule/error.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"

namespace qjoule::model {
namespace {

using json = nlohmann::json;

bool is_llama_type(const std::string& model_type) { return model_type == "llama" || model_type == "mistral"; }
bool is_gemma3_type(const std::string& model_type) { return model_type == "gemma3_text" || model_type == "gemma3"; }

// What an architecture's transformers config class assumes for a field config.json leaves out.
struct FamilyDefaults {
  int64_t heads = 32;               // num_attention_heads
  std::optional<int64_t> head_dim;  // else hidden_size / heads
  int64_t max_positions = 2048;
  double rope_theta = 10000.0;
};

FamilyDefaults family_defaults(DecoderArch arch) {
  FamilyDefaults d;
  if (arch == DecoderArch::Qwen2) d.rope_theta = 1e6;     // Qwen2Config; Qwen3Config and LlamaConfig 1e4
  if (arch == DecoderArch::Phi3) d.max_positions = 4096;  // Phi3Config
  if (arch == DecoderArch::Mixtral) {                     // MixtralConfig
    d.max_positions = 131072;
    d.rope_theta = 1e6;
  }
  if (arch == DecoderArch::Qwen3Moe) d.max_positions = 32768;  // Qwen3MoeConfig
  if (arch == DecoderArch::Olmoe) {                            // OlmoeConfig
    d.heads = 16;
    d.max_positions = 4096;
  }
  if (arch == DecoderArch::Gemma3) {  // Gemma3TextConfig
    d.heads = 8;
    d.head_dim = 256;
    d.max_positions = 131072;
    d.rope_theta = 1e6;
  }
  return d;
}

std::optional<int32_t> token_id(const json& config, const char* field) {
  auto it = config.find(field);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int32_t>();
  if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) return (*it)[0].get<int32_t>();  // eos lists
  return std::nullopt;
}

bool bool_field(const ConfigReconciler& r, const json& config, const char* field, bool fallback) {
  return model::bool_field(config, field, fallback, r.path() + ": ");
}

// Which layers attend through a sliding window and how wide, as transformers decides it: layer_types when
// config.json has them; else Gemma 3's pattern (every sliding_window_pattern-th layer full), Mistral's every
// layer, Qwen's layers from max_window_layers on (with use_sliding_window). A window no shorter than the
// positions is full attention.
void read_layer_windows(const ConfigReconciler& r, const json& config, DecoderConfig& out) {
  const bool qwen =
      out.arch == DecoderArch::Qwen2 || out.arch == DecoderArch::Qwen3 || out.arch == DecoderArch::Qwen3Moe;
  std::optional<int64_t> window;
  if (const auto it = config.find("sliding_window"); it == config.end()) {
    // Absent: MistralConfig, Gemma3TextConfig and the Qwen configs default to 4096.
    if (out.model_type == "mistral" || out.arch == DecoderArch::Gemma3 || qwen) window = 4096;
  } else {
    window = r.int_field("sliding_window");
  }
  if (window && *window <= 0)
    fail("{}: sliding_window = {}, expected a positive number of tokens or null", r.path(), *window);
  // Phi-3 windows every layer when sliding_window is set (Phi-3-mini-4k: 2047); Phi3Config's default is none.
  if (qwen && !bool_field(r, config, "use_sliding_window", false)) window.reset();
  if (out.model_type == "llama" || out.arch == DecoderArch::Olmoe) window.reset();  // they attend to every token
  std::vector<bool> sliding(static_cast<std::size_t>(out.num_layers), false);
  if (const auto it = config.find("layer_types"); it != config.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int64_t>(it->size()) != out.num_layers)
      fail("{}: layer_types = {}, expected a list of {} layer types (one per layer)", r.path(),
           it->dump().substr(0, 200), out.num_layers);
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        fail("{}: layer_types[{}] = {} is not supported; expected \"full_attention\" or \"sliding_attention\"",
             r.path(), i, t.dump());
      sliding[i] = t == "sliding_attention";
      if (sliding[i] && !window)
        fail("{}: layer_types[{}] is \"sliding_attention\" but sliding_window is null", r.path(), i);
    }
  } else if (window && out.arch == DecoderArch::Gemma3) {
    const int64_t pattern = r.int_field("sliding_window_pattern").value_or(6);
    if (pattern <= 0) fail("{}: sliding_window_pattern = {}, expected a positive number", r.path(), pattern);
    for (int64_t i = 0; i < out.num_layers; ++i) sliding[static_cast<std::size_t>(i)] = (i + 1) % pattern != 0;
  } else if (window) {
    // Qwen3-MoE (transformers 5) windows every layer when use_sliding_window is set.
    const int64_t from = qwen && out.arch != DecoderArch::Qwen3Moe ? r.int_field("max_window_layers").value_or(28) : 0;
    for (int64_t i = from; i < out.num_layers; ++i) sliding[static_cast<std::size_t>(i)] = true;
  }
  if (!window || *window >= out.max_positions) return;
  out.layer_window.assign(sliding.size(), 0);
  for (std::size_t i = 0; i < sliding.size(); ++i) out.layer_window[i] = sliding[i] ? *window : 0;
}

// Gemma 3's fields beyond the Llama family's: GeGLU, the attention scale, the embeddings' scale, the
// sliding layers' RoPE base; what it asks for that qjoule does not do is one line naming the field.
void read_gemma3_fields(const ConfigReconciler& r, const json& config, DecoderConfig& out) {
  for (const char* softcap : {"final_logit_softcapping", "attn_logit_softcapping"}) {
    if (const auto it = config.find(softcap); it != config.end() && !it->is_null())
      fail("{}: {} = {} is not supported; expected null (as Gemma 3 publishes it)", r.path(), softcap, it->dump());
  }
  if (bool_field(r, config, "use_bidirectional_attention", false))
    fail("{}: use_bidirectional_attention = true is not supported; expected false (a causal decoder)", r.path());
  out.activation =
      string_field(config, "hidden_activation",
                   string_field(config, "hidden_act", "gelu_pytorch_tanh", r.path() + ": "), r.path() + ": ");
  if (out.activation != "gelu_pytorch_tanh" && out.activation != "gelu_new")
    fail("{}: hidden_activation = '{}' is not supported for Gemma 3; expected gelu_pytorch_tanh (GeGLU)", r.path(),
         out.activation);
  out.attention_scale = static_cast<float>(1.0 / std::sqrt(r.positive_number_field("query_pre_attn_scalar", 256.0)));
  out.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(out.hidden_size)));
  out.sandwich_norms = out.norm_offset_one = out.qk_norm = true;
  if (!rope_split_by_layer_type(config)) {
    out.local_rope_theta = r.positive_number_field("rope_local_base_freq", 10000.0);
    return;
  }
  const json local = rope_config_of(config, "sliding_attention");
  out.local_rope_theta = read_rope_theta(r, local, 10000.0);
  if (const auto type = read_rope_scaling(r, local, out.max_positions).type; type != "default")
    fail("{}: rope_parameters.sliding_attention.rope_type = '{}' is not supported; expected default", r.path(), type);
}

// Where a Gemma3ForConditionalGeneration checkpoint keeps its language model: transformers 4.50 wrote
// "language_model.model." (head "language_model.lm_head."), later versions "model.language_model.".
void gemma3_text_prefix(const ConfigReconciler& r, const io::Checkpoint& ck, DecoderConfig& out) {
  if (ck.contains("language_model.model.embed_tokens.weight")) {
    out.prefix = "language_model.model.";
    out.lm_head_tensor = "language_model.lm_head.weight";
  } else if (ck.contains("model.language_model.embed_tokens.weight")) {
    out.prefix = "model.language_model.";
  } else {
    fail(
        "{}: a Gemma3ForConditionalGeneration checkpoint needs 'model.language_model.embed_tokens.weight' (or "
        "'language_model.model.embed_tokens.weight'); neither is present",
        r.path());
  }
}

void load_llama_family(const std::filesystem::path& path, const json& config, const io::Checkpoint& ck,
                       DecoderConfig& out) {
  ConfigReconciler r(path, config, ck, out.inferred_fields);
  const FamilyDefaults defaults = family_defaults(out.arch);
  out.prefix = "model.";
  out.lm_head_tensor = "lm_head.weight";
  if (out.architecture == "Gemma3ForConditionalGeneration") gemma3_text_prefix(r, ck, out);
  const std::string emb = out.prefix + "embed_tokens.weight";
  const std::string l0 = out.prefix + "layers.0.";
  out.vocab_size = r.reconcile("vocab_size", emb, 0);
  out.hidden_size = r.reconcile("hidden_size", emb, 1);
  // A Linear's output rows: its weight's first dimension, or what a pre-quantized one's packed tensors give.
  const auto rows_of = [&](const std::string& linear) {
    return out.quantization ? prequantized_linear_dims(ck, *out.quantization, linear).first
                            : r.tensor(linear + ".weight").shape.at(0);
  };
  const bool phi3 = out.arch == DecoderArch::Phi3;
  out.fused_projections = phi3;
  const std::string gate = l0 + (phi3 ? "mlp.gate_up_proj" : "mlp.gate_proj");
  if (is_moe_arch(out.arch)) {
    read_moe_fields(r, config, ck, out);  // the experts' width and the dense layers'
  } else if (out.quantization || phi3) {
    const int64_t gate_rows = rows_of(gate) / (phi3 ? 2 : 1);  // gate_up_proj: [gate | up]
    out.intermediate_size =
        r.reconcile_value("intermediate_size", gate_rows,
                          fmt::format("{} of '{}'", out.quantization ? "the packed tensors" : "the rows", gate) +
                              (phi3 ? " (halved: [gate | up])" : ""));
  } else {
    out.intermediate_size = r.reconcile("intermediate_size", gate + ".weight", 0);
  }

  // Phi-3's q, k and v are one tensor: q's rows from the config, k's and v's the rest, half each.
  const int64_t qkv_rows = phi3 ? rows_of(l0 + "self_attn.qkv_proj") : 0;
  auto heads = r.int_field("num_attention_heads");
  auto head_dim = r.int_field("head_dim");
  const int64_t q_out_stored = phi3 ? 0 : rows_of(l0 + "self_attn.q_proj");
  if (!heads && head_dim && *head_dim > 0 && !phi3) {
    heads = q_out_stored / *head_dim;
    out.inferred_fields.push_back("num_attention_heads");
  }
  if (!heads) {
    heads = defaults.heads;
    out.inferred_fields.push_back(fmt::format("num_attention_heads (Hugging Face default {})", defaults.heads));
  }
  out.num_heads = *heads;
  if (out.num_heads <= 0) fail("{}: num_attention_heads = {}, expected a positive number", r.path(), out.num_heads);
  if (!head_dim && defaults.head_dim) {
    head_dim = defaults.head_dim;
    out.inferred_fields.push_back(fmt::format("head_dim (Hugging Face default {})", *defaults.head_dim));
  }
  if (!head_dim) {
    if (out.hidden_size % out.num_heads != 0)
      fail("{}: num_attention_heads = {} does not divide hidden_size = {} (and no head_dim is given)", r.path(),
           out.num_heads, out.hidden_size);
    head_dim = out.hidden_size / out.num_heads;
  }
  out.head_dim = *head_dim;
  if (out.head_dim <= 0 || out.head_dim % 2 != 0)
    fail("{}: head_dim = {}, expected a positive even number (RoPE rotates pairs)", r.path(), out.head_dim);
  const int64_t q_out = phi3 ? out.num_heads * out.head_dim : q_out_stored;
  if (phi3 && (qkv_rows <= q_out || (qkv_rows - q_out) % 2 != 0))
    fail(
        "{}: num_attention_heads = {} × head_dim = {} = {} query rows, but tensor '{}' has {} rows (expected q + 2 × kv)",
        r.path(), out.num_heads, out.head_dim, q_out, l0 + "self_attn.qkv_proj.weight", qkv_rows);
  const int64_t k_out = phi3 ? (qkv_rows - q_out) / 2 : rows_of(l0 + "self_attn.k_proj");
  const std::string k_tensor = l0 + (phi3 ? "self_attn.qkv_proj.weight" : "self_attn.k_proj.weight");
  if (q_out != out.num_heads * out.head_dim)
    fail("{}: num_attention_heads = {} × head_dim = {} = {}, but tensor '{}' has {} rows", r.path(), out.num_heads,
         out.head_dim, out.num_heads * out.head_dim, l0 + "self_attn.q_proj.weight", q_out);
  if (k_out % out.head_dim != 0)
    fail("{}: tensor '{}' has {} key rows, not a multiple of head_dim = {}", r.path(), k_tensor, k_out, out.head_dim);
  const int64_t kv_from_tensor = k_out / out.head_dim;
  if (auto kv = r.int_field("num_key_value_heads")) {
    if (*kv != kv_from_tensor)
      fail("{}: num_key_value_heads = {}, but tensor '{}' has {} key rows (so {} heads of {})", r.path(), *kv, k_tensor,
           k_out, kv_from_tensor, out.head_dim);
  } else {
    out.inferred_fields.push_back("num_key_value_heads");
  }
  out.num_kv_heads = kv_from_tensor;
  if (out.num_kv_heads <= 0 || out.num_heads % out.num_kv_heads != 0)
    fail("{}: {} key/value heads do not divide {} attention heads", r.path(), out.num_kv_heads, out.num_heads);

  if (auto positions = r.int_field("max_position_embeddings")) {
    out.max_positions = *positions;
  } else {
    out.max_positions = defaults.max_positions;
    out.inferred_fields.push_back(
        fmt::format("max_position_embeddings (Hugging Face default {})", defaults.max_positions));
  }
  out.norm_eps = static_cast<float>(r.positive_number_field("rms_norm_eps", 1e-6));
  // Without the field, each architecture's transformers default (family_defaults).
  const json full = rope_config_of(config, "full_attention");
  out.rope_theta = read_rope_theta(r, full, defaults.rope_theta);
  out.rope_scaling = read_rope_scaling(r, full, out.max_positions, phi3);
  out.rotary_dim = out.head_dim;
  if (const double f = partial_rotary_factor(r, config); f != 1.0) {
    out.rotary_dim = static_cast<int64_t>(static_cast<double>(out.head_dim) * f);  // Python's int(): truncated
    if (out.rotary_dim <= 0 || out.rotary_dim % 2 != 0)
      fail("{}: partial_rotary_factor = {} turns {} of head_dim = {} values; expected a positive even number", r.path(),
           f, out.rotary_dim, out.head_dim);
  }
  if (out.arch == DecoderArch::Gemma3) {
    read_gemma3_fields(r, config, out);
  } else {
    out.activation = string_field(config, "hidden_act", "silu", r.path() + ": ");
    if (out.activation != "silu")
      fail("{}: hidden_act = '{}' is not supported for {}; expected silu (SwiGLU)", r.path(), out.activation,
           out.model_type);
  }
  const bool attention_bias = bool_field(r, config, "attention_bias", false);
  out.qkv_bias = out.arch == DecoderArch::Qwen2 || attention_bias;
  out.o_bias = attention_bias;
  out.mlp_bias = bool_field(r, config, "mlp_bias", false);
  out.qk_norm = out.arch == DecoderArch::Qwen3 || out.arch == DecoderArch::Qwen3Moe || out.arch == DecoderArch::Olmoe ||
                out.qk_norm;
  out.qk_norm_whole = out.arch == DecoderArch::Olmoe;  // q_norm over all of q's columns, k_norm over k's

  const int64_t layers = count_layers(ck, out.prefix + "layers.");
  if (auto n = r.int_field("num_hidden_layers"); n && *n != layers)
    fail("{}: num_hidden_layers = {}, but the checkpoint holds tensors for {} layers", r.path(), *n, layers);
  else if (!n)
    out.inferred_fields.push_back("num_hidden_layers");
  out.num_layers = layers;
  read_layer_windows(r, config, out);

  const bool has_head = ck.contains(out.lm_head_tensor);
  const bool tie = bool_field(r, config, "tie_word_embeddings", !has_head);
  if (!tie && !has_head)
    fail("{}: tie_word_embeddings = false, but the checkpoint has no '{}'", r.path(), out.lm_head_tensor);
  out.tie_word_embeddings = tie || !has_head;
  if (!config.contains("tie_word_embeddings")) out.inferred_fields.push_back("tie_word_embeddings");
}

void load_gpt2(const std::filesystem::path& path, const json& config, const io::Checkpoint& ck, DecoderConfig& out) {
  ConfigReconciler r(path, config, ck, out.inferred_fields);
  if (ck.contains("transformer.wte.weight"))
    out.prefix = "transformer.";
  else if (ck.contains("wte.weight"))
    out.prefix = "";
  else
    fail("{}: a GPT-2 checkpoint needs 'transformer.wte.weight' (or 'wte.weight'); neither is present",
         ck.source().string());
  const std::string p = out.prefix;
  out.vocab_size = r.reconcile("vocab_size", p + "wte.weight", 0);
  out.hidden_size = r.reconcile("n_embd", p + "wte.weight", 1);
  out.max_positions = r.reconcile("n_positions", p + "wpe.weight", 0);
  out.intermediate_size = r.reconcile("n_inner", p + "h.0.mlp.c_fc.weight", 1);  // Conv1D: [in, out]
  const int64_t layers = count_layers(ck, p + "h.");
  if (auto n = r.int_field("n_layer"); n && *n != layers)
    fail("{}: n_layer = {}, but the checkpoint holds tensors for {} layers", r.path(), *n, layers);
  else if (!n)
    out.inferred_fields.push_back("n_layer");
  out.num_layers = layers;
  if (auto heads = r.int_field("n_head")) {
    out.num_heads = *heads;
  } else {
    out.num_heads = 12;
    out.inferred_fields.push_back("n_head (Hugging Face default 12)");
  }
  if (out.num_heads <= 0 || out.hidden_size % out.num_heads != 0)
    fail("{}: n_head = {} does not divide n_embd = {}", r.path(), out.num_heads, out.hidden_size);
  out.num_kv_heads = out.num_heads;
  out.head_dim = out.hidden_size / out.num_heads;
  out.norm_eps = static_cast<float>(r.positive_number_field("layer_norm_epsilon", 1e-5));
  out.activation = string_field(config, "activation_function", "gelu_new", r.path() + ": ");
  if (out.activation != "gelu_new" && out.activation != "gelu_pytorch_tanh" && out.activation != "gelu")
    fail("{}: activation_function = '{}' is not supported; supported: gelu_new, gelu_pytorch_tanh, gelu", r.path(),
         out.activation);
  for (const char* unsupported : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"})
    if (bool_field(r, config, unsupported, false))
      fail("{}: {} = true is not supported; expected false", r.path(), unsupported);
  if (!bool_field(r, config, "scale_attn_weights", true))
    fail("{}: scale_attn_weights = false is not supported; expected true", r.path());
  out.qkv_bias = out.o_bias = out.mlp_bias = true;
  out.tie_word_embeddings = true;
}

}  // namespace

std::string supported_decoder_architectures() {
  return "llama (LlamaForCausalLM), mistral (MistralForCausalLM), qwen2 (Qwen2ForCausalLM), qwen3 "
         "(Qwen3ForCausalLM), gemma3_text (Gemma3ForCausalLM), gemma3 (Gemma3ForConditionalGeneration: its text "
         "part), phi3 (Phi3ForCausalLM: Phi-3, Phi-4-mini), gpt2 (GPT2LMHeadModel), and the mixtures of experts "
         "mixtral (MixtralForCausalLM), qwen3_moe (Qwen3MoeForCausalLM), olmoe (OlmoeForCausalLM)";
}

ModelFamily model_family(const std::filesystem::path& dir) {
  const json config = read_config_json(dir);
  const std::string type = string_field(config, "model_type", "", (dir / "config.json").string() + ": ");
  if (type == "bert" || type == "distilbert") return ModelFamily::Encoder;
  if (is_llama_type(type) || type == "qwen2" || type == "qwen3" || is_gemma3_type(type) || type == "phi3" ||
      type == "gpt2" || type == "mixtral" || type == "qwen3_moe" || type == "olmoe")
    return ModelFamily::Decoder;
  return ModelFamily::Unknown;
}

DecoderConfig load_decoder_config(const std::filesystem::path& dir, const io::Checkpoint& ck) {
  const auto path = dir / "config.json";
  const json config = read_config_json(dir);
  DecoderConfig out;
  out.model_type = string_field(config, "model_type", "", path.string() + ": ");
  std::string architectures = "none";
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty()) {
    out.architecture = config["architectures"][0].is_string() ? config["architectures"][0].get<std::string>() : "";
    architectures = config["architectures"].dump();
  }
  struct Known {
    const char* model_type;
    const char* architecture;
    DecoderArch arch;
  };
  static constexpr Known kKnown[] = {{"llama", "LlamaForCausalLM", DecoderArch::Llama},
                                     {"mistral", "MistralForCausalLM", DecoderArch::Llama},
                                     {"qwen2", "Qwen2ForCausalLM", DecoderArch::Qwen2},
                                     {"qwen3", "Qwen3ForCausalLM", DecoderArch::Qwen3},
                                     {"gemma3_text", "Gemma3ForCausalLM", DecoderArch::Gemma3},
                                     {"gemma3", "Gemma3ForConditionalGeneration", DecoderArch::Gemma3},
                                     {"phi3", "Phi3ForCausalLM", DecoderArch::Phi3},
                                     {"gpt2", "GPT2LMHeadModel", DecoderArch::Gpt2},
                                     {"mixtral", "MixtralForCausalLM", DecoderArch::Mixtral},
                                     {"qwen3_moe", "Qwen3MoeForCausalLM", DecoderArch::Qwen3Moe},
                                     {"olmoe", "OlmoeForCausalLM", DecoderArch::Olmoe}};
  const Known* match = nullptr;
  for (const auto& k : kKnown)
    if (out.model_type == k.model_type && (out.architecture.empty() || out.architecture == k.architecture)) match = &k;
  if (!match)
    fail("{}: model_type '{}' with architectures {} is not a supported decoder; supported: {}", path.string(),
         out.model_type, architectures, supported_decoder_architectures());
  out.arch = match->arch;
  // Before any shape is read from the tensors: a pre-quantized checkpoint's shapes are its packed tensors'.
  out.quantization = readable_checkpoint_quantization(dir, config, ck, out.arch != DecoderArch::Gpt2,
                                                      out.arch == DecoderArch::Gpt2 ? "GPT-2" : out.model_type);
  out.architecture = match->architecture;
  // Gemma3ForConditionalGeneration: its language model's config is text_config (the vision tower is not read).
  const bool text_part = out.model_type == "gemma3";
  if (text_part && (!config.contains("text_config") || !config["text_config"].is_object()))
    fail("{}: a Gemma3ForConditionalGeneration config needs a text_config object; {}", path.string(),
         config.contains("text_config") ? "it is " + config["text_config"].dump().substr(0, 80) : "there is none");
  const json& text = text_part ? config["text_config"] : config;
  if (out.arch == DecoderArch::Gpt2)
    load_gpt2(path, config, ck, out);
  else
    load_llama_family(text_part ? std::filesystem::path(path.string() + " text_config") : path, text, ck, out);
  out.bos_token_id = token_id(text, "bos_token_id");
  out.eos_token_id = token_id(text, "eos_token_id");
  if (!out.bos_token_id) out.bos_token_id = token_id(config, "bos_token_id");
  if (!out.eos_token_id) out.eos_token_id = token_id(config, "eos_token_id");
  require_token_id_in_vocab(path, "bos_token_id", out.bos_token_id, out.vocab_size);
  require_token_id_in_vocab(path, "eos_token_id", out.eos_token_id, out.vocab_size);
  if (out.num_layers == 0) fail("{}: the checkpoint holds no transformer layers", path.string());
  return out;
}

}  // namespace qjoule::model

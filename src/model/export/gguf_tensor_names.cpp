#include "model/export/gguf_tensor_names.h"

#include <array>
#include <utility>

namespace qjoule::model {
namespace {

using Names = std::pair<const char*, const char*>;  // {Hugging Face, llama.cpp}

constexpr std::array<Names, 3> kTop = {{{"model.embed_tokens.weight", "token_embd.weight"},
                                        {"model.norm.weight", "output_norm.weight"},
                                        {"lm_head.weight", "output.weight"}}};
// Within block i: "model.layers.i." + first, "blk.i." + second.
constexpr std::array<Names, 15> kInBlock = {{{"input_layernorm.weight", "attn_norm.weight"},
                                             {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                             {"self_attn.q_proj.weight", "attn_q.weight"},
                                             {"self_attn.k_proj.weight", "attn_k.weight"},
                                             {"self_attn.v_proj.weight", "attn_v.weight"},
                                             {"self_attn.o_proj.weight", "attn_output.weight"},
                                             {"self_attn.q_proj.bias", "attn_q.bias"},
                                             {"self_attn.k_proj.bias", "attn_k.bias"},
                                             {"self_attn.v_proj.bias", "attn_v.bias"},
                                             {"self_attn.o_proj.bias", "attn_output.bias"},
                                             {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // Qwen3
                                             {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                                             {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                             {"mlp.up_proj.weight", "ffn_up.weight"},
                                             {"mlp.down_proj.weight", "ffn_down.weight"}}};

// `name` = prefix + digits + "." + a table entry's `side` -> the other side with `other_prefix`.
std::optional<std::string> translate(const std::string& name, const std::string& prefix,
                                     const std::string& other_prefix, bool from_hf) {
  for (const auto& [hf, gguf] : kTop)
    if (name == (from_hf ? hf : gguf)) return std::string(from_hf ? gguf : hf);
  if (!name.starts_with(prefix)) return std::nullopt;
  const auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  const std::string block = name.substr(prefix.size(), dot - prefix.size()), rest = name.substr(dot + 1);
  for (const auto& [hf, gguf] : kInBlock)
    if (rest == (from_hf ? hf : gguf)) return other_prefix + block + "." + (from_hf ? gguf : hf);
  return std::nullopt;
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf) {
  return translate(hf, "model.layers.", "blk.", true).value_or("");
}

std::optional<std::string> hf_tensor_name(const std::string& gguf) {
  return translate(gguf, "blk.", "model.layers.", false);
}

}  // namespace qjoule::model

#include "model/export/gguf_tensor_names.h"

#include <array>
#include <span>
#include <utility>

namespace qjoule::model {
namespace {

using Names = std::pair<const char*, const char*>;  // {Hugging Face, llama.cpp}

constexpr std::array<Names, 3> kTop = {{{"model.embed_tokens.weight", "token_embd.weight"},
                                        {"model.norm.weight", "output_norm.weight"},
                                        {"lm_head.weight", "output.weight"}}};
// Within block i: "model.layers.i." + first, "blk.i." + second.
constexpr std::array<Names, 13> kInBlock = {{{"input_layernorm.weight", "attn_norm.weight"},
                                             {"self_attn.q_proj.weight", "attn_q.weight"},
                                             {"self_attn.k_proj.weight", "attn_k.weight"},
                                             {"self_attn.v_proj.weight", "attn_v.weight"},
                                             {"self_attn.o_proj.weight", "attn_output.weight"},
                                             {"self_attn.q_proj.bias", "attn_q.bias"},
                                             {"self_attn.k_proj.bias", "attn_k.bias"},
                                             {"self_attn.v_proj.bias", "attn_v.bias"},
                                             {"self_attn.o_proj.bias", "attn_output.bias"},
                                             {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // Qwen3, Gemma 3
                                             {"self_attn.k_norm.weight", "attn_k_norm.weight"},
                                             {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                             {"mlp.down_proj.weight", "ffn_down.weight"}}};
// Llama, Mistral, Qwen2 / Qwen3: one norm before each sublayer; Mixtral's router.
constexpr std::array<Names, 3> kLlamaBlock = {{{"post_attention_layernorm.weight", "ffn_norm.weight"},
                                               {"mlp.up_proj.weight", "ffn_up.weight"},
                                               {"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"}}};
// Qwen3-MoE, OLMoE: the router under mlp.
constexpr std::array<Names, 2> kMlpMoeBlock = {
    {{"post_attention_layernorm.weight", "ffn_norm.weight"}, {"mlp.gate.weight", "ffn_gate_inp.weight"}}};
// An expert's projections: {Hugging Face's (Mixtral's), llama.cpp's stacked tensor}.
struct ExpertNames {
  const char* hf;
  const char* mixtral;
  const char* gguf;
};
constexpr std::array<ExpertNames, 3> kExperts = {{{"gate_proj.weight", "w1.weight", "ffn_gate_exps.weight"},
                                                  {"up_proj.weight", "w3.weight", "ffn_up_exps.weight"},
                                                  {"down_proj.weight", "w2.weight", "ffn_down_exps.weight"}}};

// "<digits>." at name[at], its value and where the rest begins; nullopt otherwise.
std::optional<std::pair<int64_t, std::size_t>> index_at(const std::string& name, std::size_t at) {
  const auto dot = name.find('.', at);
  if (dot == std::string::npos || dot == at || dot - at > 9) return std::nullopt;
  int64_t value = 0;
  for (std::size_t i = at; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    value = value * 10 + (name[i] - '0');
  }
  return std::pair{value, dot + 1};
}
// Gemma 3: a norm before and after each sublayer (transformers' post_attention_layernorm is the one after
// the attention).
constexpr std::array<Names, 4> kGemma3Block = {{{"post_attention_layernorm.weight", "post_attention_norm.weight"},
                                                {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
                                                {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
                                                {"mlp.up_proj.weight", "ffn_up.weight"}}};
// Phi-3: q | k | v and gate | up as one tensor each (llama.cpp's ffn_up holds both halves).
constexpr std::array<Names, 3> kPhi3Block = {{{"post_attention_layernorm.weight", "ffn_norm.weight"},
                                              {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
                                              {"mlp.gate_up_proj.weight", "ffn_up.weight"}}};

std::span<const Names> arch_block(const std::string& arch) {
  if (arch == "gemma3") return kGemma3Block;
  if (arch == "phi3") return kPhi3Block;
  if (arch == "qwen3moe" || arch == "olmoe") return kMlpMoeBlock;
  return kLlamaBlock;
}

// `name` = prefix + digits + "." + a table entry's `side` -> the other side with `other_prefix`.
std::optional<std::string> translate(const std::string& name, const std::string& prefix,
                                     const std::string& other_prefix, bool from_hf, const std::string& arch) {
  for (const auto& [hf, gguf] : kTop)
    if (name == (from_hf ? hf : gguf)) return std::string(from_hf ? gguf : hf);
  if (!name.starts_with(prefix)) return std::nullopt;
  const auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  const std::string block = name.substr(prefix.size(), dot - prefix.size()), rest = name.substr(dot + 1);
  for (const std::span<const Names> table : {std::span<const Names>(kInBlock), arch_block(arch)})
    for (const auto& [hf, gguf] : table)
      if (rest == (from_hf ? hf : gguf)) return other_prefix + block + "." + (from_hf ? gguf : hf);
  return std::nullopt;
}

}  // namespace

std::string gguf_tensor_name(const std::string& hf, const std::string& arch) {
  return translate(hf, "model.layers.", "blk.", true, arch).value_or("");
}

std::optional<std::string> hf_tensor_name(const std::string& gguf, const std::string& arch) {
  return translate(gguf, "blk.", "model.layers.", false, arch);
}

std::optional<GgufExpertTensor> gguf_expert_tensor(const std::string& hf) {
  const std::string layers = "model.layers.";
  if (!hf.starts_with(layers)) return std::nullopt;
  const auto layer = index_at(hf, layers.size());
  if (!layer) return std::nullopt;
  for (const std::string block : {"block_sparse_moe.experts.", "mlp.experts."}) {
    if (hf.compare(layer->second, block.size(), block) != 0) continue;
    const auto expert = index_at(hf, layer->second + block.size());
    if (!expert) return std::nullopt;
    const std::string rest = hf.substr(expert->second);
    for (const auto& e : kExperts)
      if (rest == (block.starts_with("block_sparse_moe") ? e.mixtral : e.hf))
        return GgufExpertTensor{"blk." + std::to_string(layer->first) + "." + e.gguf, expert->first};
  }
  return std::nullopt;
}

std::optional<std::string> hf_expert_tensor_name(const std::string& gguf, int64_t expert, const std::string& arch) {
  if (!gguf.starts_with("blk.")) return std::nullopt;
  const auto layer = index_at(gguf, 4);
  if (!layer) return std::nullopt;
  const std::string rest = gguf.substr(layer->second);
  const bool mixtral = arch == "llama";
  for (const auto& e : kExperts)
    if (rest == e.gguf)
      return "model.layers." + std::to_string(layer->first) +
             (mixtral ? ".block_sparse_moe.experts." : ".mlp.experts.") + std::to_string(expert) + "." +
             (mixtral ? e.mixtral : e.hf);
  return std::nullopt;
}

}  // namespace qjoule::model

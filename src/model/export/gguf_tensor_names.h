// llama.cpp's names of a decoder's tensors and Hugging Face's, one table for both directions: gguf_export
// writes the GGUF names, gguf_import reads them back. Most names are every architecture's; the norms
// around each sublayer, the fused projections and a mixture's router depend on it (llama.cpp's `arch`: "llama"
// (Mixtral too), "qwen2", "qwen3", "qwen3moe", "olmoe", "gemma3", "phi3"). A mixture's experts are one 3-D GGUF
// tensor per projection and layer ("blk.N.ffn_up_exps.weight", ne = {in, out, experts}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace qjoule::model {

// llama.cpp's name of a Hugging Face tensor named as a CausalLM stores it ("model.layers.3.mlp.up_proj.weight"
// -> "blk.3.ffn_up.weight"), "" for one it has no use for.
std::string gguf_tensor_name(const std::string& hf, const std::string& arch);
// The Hugging Face name of a GGUF tensor that gguf_tensor_name gives, nullopt for any other.
std::optional<std::string> hf_tensor_name(const std::string& gguf, const std::string& arch);

// One expert's Linear in its mixture's stacked GGUF tensor: "model.layers.3.mlp.experts.5.up_proj.weight"
// (Mixtral: "model.layers.3.block_sparse_moe.experts.5.w3.weight") -> {"blk.3.ffn_up_exps.weight", 5}.
struct GgufExpertTensor {
  std::string gguf;
  int64_t expert = 0;
};
std::optional<GgufExpertTensor> gguf_expert_tensor(const std::string& hf);
// The Hugging Face name of expert `expert` of a stacked GGUF tensor, nullopt when `gguf` is not one.
std::optional<std::string> hf_expert_tensor_name(const std::string& gguf, int64_t expert, const std::string& arch);

}  // namespace qjoule::model

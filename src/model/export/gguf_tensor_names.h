// llama.cpp's names of a decoder's tensors and Hugging Face's, one table for both directions: gguf_export
// writes the GGUF names, gguf_import reads them back. Most names are every architecture's; the norms
// around each sublayer and the fused projections depend on it (llama.cpp's `arch`: "llama", "qwen2",
// "qwen3", "gemma3", "phi3").
#pragma once

#include <optional>
#include <string>

namespace qjoule::model {

// llama.cpp's name of a Hugging Face tensor named as a CausalLM stores it ("model.layers.3.mlp.up_proj.weight"
// -> "blk.3.ffn_up.weight"), "" for one it has no use for.
std::string gguf_tensor_name(const std::string& hf, const std::string& arch);
// The Hugging Face name of a GGUF tensor that gguf_tensor_name gives, nullopt for any other.
std::optional<std::string> hf_tensor_name(const std::string& gguf, const std::string& arch);

}  // namespace qjoule::model

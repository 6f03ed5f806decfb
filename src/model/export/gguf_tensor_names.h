// llama.cpp's names of a Llama / Mistral / Qwen2 decoder's tensors and Hugging Face's, one table for both
// directions: gguf_export writes the GGUF names, gguf_import reads them back.
#pragma once

#include <optional>
#include <string>

namespace qjoule::model {

// llama.cpp's name of a Hugging Face tensor ("model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight"),
// "" for one it has no use for.
std::string gguf_tensor_name(const std::string& hf);
// The Hugging Face name of a GGUF tensor that gguf_tensor_name gives, nullopt for any other.
std::optional<std::string> hf_tensor_name(const std::string& gguf);

}  // namespace qjoule::model

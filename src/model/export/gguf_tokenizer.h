// The tokenizer a GGUF file carries, from a Hugging Face tokenizer.json (gguf_export.h): byte-level BPE as
// llama.cpp's "gpt2" model (tokens, types, merges, the pre-tokenizer it must split text with),
// SentencePiece-style BPE (byte fallback) as its "llama" model with each token scored by its merge rank.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace qjoule::model {

struct GgufTokenizer {
  std::string model;  // "gpt2" or "llama"
  std::string pre;    // gpt2: llama.cpp's pre-tokenizer ("gpt-2", "llama3", "qwen2", "default")
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;        // llama
  std::vector<std::string> merges;  // gpt2
  std::optional<int32_t> unk;
};

// `dir`/tokenizer.json as llama.cpp's vocabulary of `vocab_size` tokens (the rows of the embeddings; ids the
// tokenizer does not name are "[PAD<id>]", unused); one line naming the file when it is absent or not BPE.
GgufTokenizer read_gguf_tokenizer(const std::filesystem::path& dir, int64_t vocab_size);

}  // namespace qjoule::model

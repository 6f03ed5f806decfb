// BPE tokenizer for decoder language models, read from a Hugging Face tokenizer.json and
// compatible with Hugging Face `tokenizers` for the two families in use:
//   byte-level  (GPT-2, Llama-3, Qwen2): optional NFC normalizer, pre_tokenizer ByteLevel (GPT-2
//               regex) or Sequence[Split(Llama-3 / Qwen2 / GPT-2 regex), ByteLevel(use_regex=false)],
//               BPE over GPT-2's byte->unicode alphabet, decoder ByteLevel.
//   sentencepiece (Llama-2, TinyLlama): normalizer Sequence[Prepend("▁"), Replace(" ", "▁")] or
//               pre_tokenizer Metaspace, BPE with byte_fallback (<0xNN>) and fuse_unk, decoder
//               Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)] (or Metaspace).
// Merges are applied by rank (lowest first, leftmost on ties), as tokenizers' BPE does.
// added_tokens are matched in the text first (leftmost, longest first; lstrip/rstrip honoured) and
// never split. The post-processor (TemplateProcessing, ByteLevel, or a Sequence of them) gives the
// special tokens put around a text when add_special_tokens is true.
// Not supported (loading fails with a one-line message naming the field): other model, normalizer,
// pre-tokenizer, decoder or post-processor types, unknown Split patterns, BPE dropout,
// continuing_subword_prefix / end_of_word_suffix, single_word added tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qjoule::tokenize {

class BpeTokenizer {
 public:
  // `path` is a tokenizer.json, or a model directory containing one.
  static BpeTokenizer from_tokenizer_json(const std::filesystem::path& path);

  // Token ids of `text` (valid UTF-8, else qjoule::Error). With add_special_tokens, the
  // post-processor's template tokens (e.g. Llama's leading <s>) are added around the ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Text of `ids` through the tokenizer.json decoder; added special tokens are kept unless
  // skip_special_tokens. Throws qjoule::Error on an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  // One past the largest id of model.vocab and added_tokens.
  int32_t vocab_size() const;
  // BOS: the special token the post-processor puts first; else tokenizer_config.json's bos_token
  // (beside tokenizer.json); else an added token named <s> or <|begin_of_text|>.
  std::optional<int32_t> bos_id() const;
  // EOS: the special token the post-processor puts last; else tokenizer_config.json's eos_token;
  // else an added token named </s>, <|end_of_text|> or <|endoftext|>.
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // "byte-level" or "sentencepiece".
  std::string style() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace qjoule::tokenize

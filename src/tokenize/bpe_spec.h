// What a BPE tokenizer.json describes, read once: normalizer, pre-tokenizer and decoder steps,
// the BPE model, added tokens and the post-processor's template.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tokenize/bpe_model.h"
#include "tokenize/bpe_split_patterns.h"

namespace qjoule::tokenize {

// Normalizers (tokenizers' Prepend, Replace with a String pattern, NFC), applied in order.
struct PrependNormalizer {
  std::string prepend;
};
struct ReplaceNormalizer {
  std::string pattern;
  std::string content;
};
struct NfcNormalizer {};
using NormalizerStep = std::variant<PrependNormalizer, ReplaceNormalizer, NfcNormalizer>;

// Pre-tokenizers, each splitting every piece the previous ones made.
struct ByteLevelPreTokenizer {
  bool add_prefix_space = false;
  bool use_regex = true;
};
struct SplitPreTokenizer {
  SplitPattern pattern = SplitPattern::kGpt2;
};  // behavior Isolated
enum class PrependScheme { kAlways, kFirst, kNever };
struct MetaspacePreTokenizer {
  std::string replacement = "\xE2\x96\x81";  // ▁
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
};
using PreTokenizerStep = std::variant<ByteLevelPreTokenizer, SplitPreTokenizer, MetaspacePreTokenizer>;

// Decoders, each turning the token strings into new ones.
struct ByteLevelDecoder {};
struct ReplaceDecoder {
  std::string pattern;
  std::string content;
};
struct ByteFallbackDecoder {};
struct FuseDecoder {};
struct StripDecoder {
  char32_t content = U' ';
  size_t start = 0;
  size_t stop = 0;
};
struct MetaspaceDecoder {
  std::string replacement;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
};
using DecoderStep =
    std::variant<ByteLevelDecoder, ReplaceDecoder, ByteFallbackDecoder, FuseDecoder, StripDecoder, MetaspaceDecoder>;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false;  // matched in the normalized text rather than the raw text
  bool lstrip = false;      // the match takes the whitespace before it
  bool rstrip = false;      // the match takes the whitespace after it
};

struct BpeSpec {
  std::filesystem::path source;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  BpeModel model;
  std::vector<AddedToken> added_tokens;
  bool has_post_processor_template = false;
  std::vector<int32_t> template_prefix;  // special ids before $A
  std::vector<int32_t> template_suffix;  // special ids after $A
  std::vector<DecoderStep> decoder;      // empty: tokens joined by spaces, as without a decoder
  bool has_decoder = false;
  std::optional<std::string> config_bos_token;  // tokenizer_config.json beside tokenizer.json
  std::optional<std::string> config_eos_token;
  bool byte_level = false;  // else SentencePiece-style
};

// Reads `path` (a tokenizer.json); every unsupported or malformed part throws qjoule::Error.
BpeSpec read_bpe_tokenizer_json(const std::filesystem::path& path);

}  // namespace qjoule::tokenize

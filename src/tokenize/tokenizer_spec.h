// Everything a WordPiece tokenizer is built from, as read from vocab.txt / tokenizer.json /
// tokenizer_config.json. Internal to qjoule_tokenize.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/tokenize/wordpiece_tokenizer.h"
#include "tokenize/vocabulary.h"

namespace qjoule::tokenize {

struct TokenizerSpec {
  std::filesystem::path source;  // the file the vocabulary came from (for messages)
  Vocabulary vocabulary;
  WordPieceOptions options;
  std::string unk_token = "[UNK]";
  std::string continuing_subword_prefix = "##";
  size_t max_input_chars_per_word = 100;
  // Tokens matched verbatim in the raw text before normalisation (Hugging Face "added tokens"
  // with normalized=false, e.g. [CLS], [SEP], [MASK]).
  std::vector<std::string> literal_tokens;
};

// vocab.txt: one token per line (LF, CRLF or CR), id = 0-based line number.
TokenizerSpec read_vocab_txt(const std::filesystem::path& path, const WordPieceOptions& options);
// tokenizer.json with a WordPiece model, BertNormalizer (or none) and BertPreTokenizer.
TokenizerSpec read_tokenizer_json(const std::filesystem::path& path);
// Options from tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars);
// keys that are absent keep BertTokenizer's defaults.
WordPieceOptions read_tokenizer_config(const std::filesystem::path& path);

}  // namespace qjoule::tokenize

// Uncased BERT WordPiece tokenizer, compatible with Hugging Face's BertTokenizerFast (tokenizers'
// BertNormalizer + BertPreTokenizer + WordPiece model + `[CLS] $A [SEP]` template):
//   clean text -> space out CJK ideographs -> strip accents (NFD, drop Mn) -> lower-case
//   -> split on whitespace and punctuation -> greedy longest-match WordPiece (`##` pieces, [UNK]).
// Special tokens written literally in the text ("[SEP]", "[MASK]", ...) map to their ids, as in
// Hugging Face. Every bad input (missing file, invalid UTF-8, vocabulary without a special token)
// throws qjoule::Error with a one-line message naming where.
//
// Checked against Hugging Face `tokenizers` on every code point and on all SST-2 sentences; the
// known differences are in src/tokenize/unicode_classes.h (characters newer than tokenizers'
// Unicode tables; CJK U+2B820..U+2B91F). Like BertTokenizerFast (and unlike the Python
// BertTokenizer) unassigned code points are kept, and lower-casing has no final-sigma rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/tokenize/batch.h"

namespace qjoule::tokenize {

struct WordPieceOptions {
  bool lowercase = true;               // BertNormalizer.lowercase / do_lower_case
  bool strip_accents = true;           // NFD then drop nonspacing marks (Mn)
  bool tokenize_chinese_chars = true;  // put spaces around CJK ideographs
  bool clean_text = true;              // drop control chars, U+0000, U+FFFD; whitespace -> ' '
};

// One text encoded as `[CLS] pieces... [SEP]`.
struct Encoding {
  std::vector<int32_t> ids;
  bool truncated = false;         // true when pieces were dropped to fit max_length
  size_t untruncated_length = 0;  // ids.size() had there been no limit (counting [CLS]/[SEP])
};

class WordPieceTokenizer {
 public:
  // `vocab.txt`: one token per line, id = 0-based line number.
  static WordPieceTokenizer from_vocab_txt(const std::filesystem::path& vocab_txt, WordPieceOptions options = {});
  // Hugging Face `tokenizer.json` whose model.type is "WordPiece" (normalizer flags are honoured).
  static WordPieceTokenizer from_tokenizer_json(const std::filesystem::path& tokenizer_json);
  // A model directory: tokenizer.json (WordPiece) if present, else vocab.txt with options from
  // tokenizer_config.json (do_lower_case, strip_accents, tokenize_chinese_chars) when present.
  static WordPieceTokenizer from_model_dir(const std::filesystem::path& model_dir);

  // Word pieces of `text`, without [CLS]/[SEP]. `context` names the text in error messages
  // (e.g. "dev.tsv:17").
  std::vector<std::string> tokenize(std::string_view text, std::string_view context = {}) const;
  // Token ids of the pieces, without [CLS]/[SEP].
  std::vector<int32_t> piece_ids(std::string_view text, std::string_view context = {}) const;
  // `[CLS] pieces [SEP]`, keeping the first max_length - 2 pieces (max_length >= 2).
  Encoding encode(std::string_view text, size_t max_length, std::string_view context = {}) const;

  int32_t cls_id() const;
  int32_t sep_id() const;
  int32_t pad_id() const;
  int32_t unk_id() const;

  size_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string& id_to_token(int32_t id) const;  // throws qjoule::Error when out of range

  const WordPieceOptions& options() const;
  const std::filesystem::path& source() const;  // the file the vocabulary came from

 private:
  struct Impl;
  explicit WordPieceTokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace qjoule::tokenize

// The WordPiece model: greedy longest-match-first splitting of one word into vocabulary pieces,
// continuation pieces carrying a prefix ("##"); a word that cannot be split, or that is longer
// than max_input_chars_per_word characters, becomes the unknown token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/vocabulary.h"

namespace qjoule::tokenize {

class WordPieceModel {
 public:
  WordPieceModel(const Vocabulary& vocabulary, int32_t unk_id, std::string continuing_subword_prefix,
                 size_t max_input_chars_per_word);

  // Appends the ids of `word`'s pieces to `ids`.
  void append_word_ids(std::u32string_view word, std::vector<int32_t>& ids) const;

 private:
  const Vocabulary* vocabulary_;
  int32_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace qjoule::tokenize

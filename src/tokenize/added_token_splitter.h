// Finds added tokens in text before the model sees it, as tokenizers' AddedVocabulary does: the
// leftmost match wins, the longest token among those starting there; lstrip / rstrip tokens take
// the whitespace beside them. Matched tokens are never split further.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenize/bpe_spec.h"

namespace qjoule::tokenize {

struct TextSegment {
  std::string_view text;         // a view into the split text
  std::optional<int32_t> token;  // the added token's id, or nullopt for ordinary text
  size_t offset = 0;             // byte offset of `text` in the split text
};

class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  explicit AddedTokenSplitter(std::vector<AddedToken> tokens);

  // Ordinary stretches and token matches of valid UTF-8 `text`, in order; empty stretches omitted.
  std::vector<TextSegment> split(std::string_view text) const;
  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;  // longest first
};

}  // namespace qjoule::tokenize

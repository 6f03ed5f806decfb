#include "tokenize/vocabulary.h"

#include <utility>

namespace qjoule::tokenize {

Vocabulary::Vocabulary(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) ids_.insert_or_assign(tokens_[i], static_cast<int32_t>(i));
}

std::optional<int32_t> Vocabulary::find(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace qjoule::tokenize

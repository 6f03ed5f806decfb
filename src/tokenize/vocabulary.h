// A WordPiece vocabulary: token <-> id, with string_view lookups that do not allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace qjoule::tokenize {

class Vocabulary {
 public:
  Vocabulary() = default;
  // tokens[i] has id i. Duplicates are allowed (the last id wins for lookups, as in Hugging Face).
  explicit Vocabulary(std::vector<std::string> tokens);

  size_t size() const { return tokens_.size(); }
  std::optional<int32_t> find(std::string_view token) const;
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  bool contains_id(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size(); }

 private:
  struct TransparentHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t, TransparentHash, std::equal_to<>> ids_;
};

}  // namespace qjoule::tokenize

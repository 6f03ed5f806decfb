// The BPE model of Hugging Face `tokenizers`: a word is split into characters (unknown ones into
// <0xNN> byte tokens with byte_fallback, else the unk token, fused when fuse_unk), then merges are
// applied lowest rank first, leftmost first among equal ranks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace qjoule::tokenize {

struct BpeModelOptions {
  std::optional<std::string> unk_token;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;  // a word that is a whole vocabulary token is taken as it is (Llama-3)
};

class BpeModel {
 public:
  BpeModel() = default;
  // `vocab`: token -> id; `merges`: pairs in rank order. A merge whose parts or result are not in
  // the vocabulary throws qjoule::Error naming `source` and the merge's index.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeModelOptions options,
           std::string_view source);

  // Appends the ids of one pre-tokenized word (valid UTF-8) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }
  const BpeModelOptions& options() const { return options_; }

 private:
  struct PairHash {
    size_t operator()(const std::pair<int32_t, int32_t>& p) const noexcept {
      return std::hash<uint64_t>{}((static_cast<uint64_t>(static_cast<uint32_t>(p.first)) << 32) |
                                   static_cast<uint32_t>(p.second));
    }
  };
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::pair<int32_t, int32_t>, Merge, PairHash> merges_;
  std::optional<int32_t> unk_id_;
  std::array<std::optional<int32_t>, 256> byte_ids_{};  // <0xNN> tokens, for byte_fallback
  BpeModelOptions options_;
};

}  // namespace qjoule::tokenize

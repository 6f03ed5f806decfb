#include "tokenize/bpe_model.h"

#include <algorithm>
#include <queue>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::tokenize {
namespace {

size_t utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// One symbol of a word being merged: a doubly linked list over the initial characters.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  size_t length;  // in initial characters' bytes; 0 once merged into its left neighbour
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator>(const Candidate& other) const { return rank != other.rank ? rank > other.rank : pos > other.pos; }
};

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeModelOptions options,
                   std::string_view source)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const auto id_of = [&](const std::string& token, size_t index, std::string_view part) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end()) {
      fail("{}: model.merges[{}] {} \"{}\" is not in model.vocab, expected merges of vocabulary tokens", source, index,
           part, token);
    }
    return it->second;
  };
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& [left, right] = merges[i];
    const int32_t a = id_of(left, i, "names");
    const int32_t b = id_of(right, i, "names");
    const int32_t merged = id_of(left + right, i, "makes");
    // A repeated merge takes its last rank: tokenizers collects the list into a map.
    merges_.insert_or_assign(std::pair{a, b}, Merge{static_cast<int32_t>(i), merged});
  }
  if (options_.unk_token) {
    if (const auto it = vocab_.find(*options_.unk_token); it != vocab_.end()) unk_id_ = it->second;
  }
  if (options_.byte_fallback) {
    for (size_t b = 0; b < 256; ++b) {
      if (const auto it = vocab_.find(fmt::format("<0x{:02X}>", b)); it != vocab_.end()) byte_ids_[b] = it->second;
    }
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto push = [&](int32_t id, size_t length) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, index - 1, index + 1, length});
  };
  bool last_was_unk = false;
  std::string ch;
  for (size_t i = 0; i < word.size();) {
    const size_t length = std::min(utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
    ch.assign(word.substr(i, length));
    i += length;
    if (const auto it = vocab_.find(ch); it != vocab_.end()) {
      push(it->second, length);
      last_was_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all_bytes_known = true;
      for (const char b : ch) all_bytes_known = all_bytes_known && byte_ids_[static_cast<unsigned char>(b)];
      if (all_bytes_known) {
        for (const char b : ch) push(*byte_ids_[static_cast<unsigned char>(b)], 1);
        last_was_unk = false;
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: tokenizers drops the character
    if (options_.fuse_unk && last_was_unk) {
      symbols.back().length += length;
    } else {
      push(*unk_id_, length);
    }
    last_was_unk = true;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    const auto it = merges_.find({symbols[static_cast<size_t>(pos)].id, symbols[static_cast<size_t>(next)].id});
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, pos, it->second.new_id});
  };
  for (int32_t pos = 0; pos < static_cast<int32_t>(symbols.size()); ++pos) consider(pos);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (left.length == 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Stale entry: this pair changed since it was queued.
    const auto it = merges_.find({left.id, right.id});
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.length > 0) out.push_back(s.id);
  }
}

}  // namespace qjoule::tokenize

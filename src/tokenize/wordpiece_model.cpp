#include "tokenize/wordpiece_model.h"

#include <utility>

#include "qjoule/tokenize/utf8.h"

namespace qjoule::tokenize {

WordPieceModel::WordPieceModel(const Vocabulary& vocabulary, int32_t unk_id, std::string continuing_subword_prefix,
                               size_t max_input_chars_per_word)
    : vocabulary_(&vocabulary),
      unk_id_(unk_id),
      prefix_(std::move(continuing_subword_prefix)),
      max_chars_(max_input_chars_per_word) {}

void WordPieceModel::append_word_ids(std::u32string_view word, std::vector<int32_t>& ids) const {
  if (word.size() > max_chars_) {
    ids.push_back(unk_id_);
    return;
  }
  // The word as UTF-8, with the byte offset where each character starts (plus the end).
  // thread_local scratch buffers: no allocation per word once they have grown.
  thread_local std::string utf8;
  thread_local std::vector<size_t> char_start;
  thread_local std::string candidate;
  utf8.clear();
  char_start.clear();
  for (const char32_t c : word) {
    char_start.push_back(utf8.size());
    append_utf8(c, utf8);
  }
  char_start.push_back(utf8.size());

  const size_t first_new = ids.size();
  const size_t chars = word.size();
  size_t start = 0;
  while (start < chars) {
    size_t end = chars;
    std::optional<int32_t> match;
    while (start < end) {
      const std::string_view piece(utf8.data() + char_start[start], char_start[end] - char_start[start]);
      if (start == 0) {
        match = vocabulary_->find(piece);
      } else {
        candidate.assign(prefix_);
        candidate.append(piece);
        match = vocabulary_->find(candidate);
      }
      if (match) break;
      --end;
    }
    if (!match) {  // no piece fits: the whole word is unknown
      ids.resize(first_new);
      ids.push_back(unk_id_);
      return;
    }
    ids.push_back(*match);
    start = end;
  }
}

}  // namespace qjoule::tokenize

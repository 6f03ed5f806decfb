#include "tokenize/bpe_pre_tokenizer.h"

#include "tokenize/bpe_normalizer.h"
#include "tokenize/byte_level_alphabet.h"

namespace qjoule::tokenize {
namespace {

// Pieces that start at each `delimiter`, the delimiter kept with the text after it
// (tokenizers' SplitDelimiterBehavior::MergedWithNext).
std::vector<std::string> split_merged_with_next(const std::string& text, const std::string& delimiter) {
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t at = text.find(delimiter, 1); at != std::string::npos; at = text.find(delimiter, at + 1)) {
    if (at > start) pieces.push_back(text.substr(start, at - start));
    start = at;
  }
  if (start < text.size()) pieces.push_back(text.substr(start));
  return pieces;
}

std::vector<std::string> split_piece(const std::string& piece, const ByteLevelPreTokenizer& step) {
  // Built by appending: GCC 12's -Wrestrict misfires on std::string::insert(0, ...).
  std::string text = step.add_prefix_space && piece.rfind(' ', 0) != 0 ? " " : "";
  text += piece;
  std::vector<std::string> out;
  if (step.use_regex) {
    for (const auto word : split_by_pattern(text, SplitPattern::kGpt2)) out.push_back(byte_level::encode_bytes(word));
  } else {
    out.push_back(byte_level::encode_bytes(text));
  }
  return out;
}

std::vector<std::string> split_piece(const std::string& piece, const SplitPreTokenizer& step) {
  std::vector<std::string> out;
  for (const auto word : split_by_pattern(piece, step.pattern)) out.emplace_back(word);
  return out;
}

std::vector<std::string> split_piece(const std::string& piece, const MetaspacePreTokenizer& step, bool at_text_start) {
  const std::string replaced = replace_all(piece, " ", step.replacement);
  const bool prepend =
      step.prepend_scheme == PrependScheme::kAlways || (step.prepend_scheme == PrependScheme::kFirst && at_text_start);
  std::string text = prepend && replaced.rfind(step.replacement, 0) != 0 ? step.replacement : "";
  text += replaced;
  if (step.split) return split_merged_with_next(text, step.replacement);
  return {text};
}

}  // namespace

std::vector<std::string> pre_tokenize_for_bpe(std::string_view text, const std::vector<PreTokenizerStep>& steps,
                                              bool at_text_start) {
  std::vector<std::string> pieces;
  if (text.empty()) return pieces;
  pieces.emplace_back(text);
  for (const auto& step : steps) {
    std::vector<std::string> next;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::vector<std::string> split;
      if (const auto* byte_level = std::get_if<ByteLevelPreTokenizer>(&step)) {
        split = split_piece(pieces[i], *byte_level);
      } else if (const auto* pattern = std::get_if<SplitPreTokenizer>(&step)) {
        split = split_piece(pieces[i], *pattern);
      } else {
        split = split_piece(pieces[i], std::get<MetaspacePreTokenizer>(step), at_text_start && i == 0);
      }
      for (auto& word : split) {
        if (!word.empty()) next.push_back(std::move(word));
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace qjoule::tokenize

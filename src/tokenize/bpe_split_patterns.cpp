#include "tokenize/bpe_split_patterns.h"

#include <cstddef>
#include <string>

#include <utf8proc.h>

#include "qjoule/tokenize/utf8.h"
#include "tokenize/unicode_classes.h"

namespace qjoule::tokenize {
namespace {

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_letter(char32_t c) {  // \p{L}
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool is_number(char32_t c) {  // \p{N}
  if (c < 0x80) return c >= '0' && c <= '9';
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return true;
    default: return false;
  }
}

bool is_space(char32_t c) { return unicode::is_whitespace(c); }                       // \s: Unicode White_Space
bool is_other(char32_t c) { return !is_space(c) && !is_letter(c) && !is_number(c); }  // [^\s\p{L}\p{N}]
bool is_newline(char32_t c) { return c == U'\r' || c == U'\n'; }

// Each matcher returns the end of its match starting at `i`, or `i` when it does not match.
class Matcher {
 public:
  explicit Matcher(const std::u32string& cps) : s_(cps) {}

  size_t run(size_t i, bool (*cls)(char32_t)) const {
    while (i < s_.size() && cls(s_[i])) ++i;
    return i;
  }
  bool at(size_t i, bool (*cls)(char32_t)) const { return i < s_.size() && cls(s_[i]); }

  // 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive (long s U+017F folds to 's').
  size_t contraction(size_t i, bool ignore_case) const {
    if (i + 1 >= s_.size() || s_[i] != U'\'') return i;
    const auto lower = [&](char32_t c) -> char32_t {
      if (!ignore_case) return c;
      if (c >= 'A' && c <= 'Z') return c + 32;
      return c == 0x17F ? U's' : c;
    };
    const char32_t a = lower(s_[i + 1]);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < s_.size()) {
      const char32_t b = lower(s_[i + 2]);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    return i;
  }
  // ` ?X+`
  size_t space_then(size_t i, bool (*cls)(char32_t)) const {
    if (s_[i] == U' ' && at(i + 1, cls)) return run(i + 1, cls);
    return run(i, cls);
  }
  // `\s+(?!\S)` then `\s+`: a whitespace run, less its last character when a non-space follows
  // (that character goes with the next piece), unless the run is a single character.
  size_t whitespace(size_t i) const {
    const size_t end = run(i, is_space);
    if (end == i) return i;
    if (end == s_.size() || end - i == 1) return end;
    return end - 1;
  }
  // `[^\r\n\p{L}\p{N}]?\p{L}+`
  size_t prefixed_letters(size_t i) const {
    const char32_t c = s_[i];
    if (!is_newline(c) && !is_letter(c) && !is_number(c) && at(i + 1, is_letter)) return run(i + 1, is_letter);
    return run(i, is_letter);
  }
  // `\p{N}{1,max}`
  size_t digits(size_t i, size_t max) const {
    size_t end = i;
    while (end < s_.size() && end - i < max && is_number(s_[end])) ++end;
    return end;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t others_then_newlines(size_t i) const {
    const size_t end = space_then(i, is_other);
    return end == i ? i : run(end, is_newline);
  }
  // `\s*[\r\n]+`: whitespace up to and including the run's last \r or \n.
  size_t whitespace_to_newline(size_t i) const {
    const size_t end = run(i, is_space);
    for (size_t k = end; k > i; --k) {
      if (is_newline(s_[k - 1])) return k;
    }
    return i;
  }

  size_t gpt2(size_t i) const {
    size_t end = contraction(i, false);
    if (end == i) end = space_then(i, is_letter);
    if (end == i) end = space_then(i, is_number);
    if (end == i) end = space_then(i, is_other);
    if (end == i) end = whitespace(i);
    return end;
  }
  size_t llama3(size_t i, size_t max_digits) const {
    size_t end = contraction(i, true);
    if (end == i) end = prefixed_letters(i);
    if (end == i) end = digits(i, max_digits);
    if (end == i) end = others_then_newlines(i);
    if (end == i) end = whitespace_to_newline(i);
    if (end == i) end = whitespace(i);
    return end;
  }

 private:
  const std::u32string& s_;
};

}  // namespace

std::optional<SplitPattern> split_pattern_of_regex(std::string_view regex) {
  for (const auto pattern : {SplitPattern::kGpt2, SplitPattern::kLlama3, SplitPattern::kQwen2}) {
    if (regex == regex_of_split_pattern(pattern)) return pattern;
  }
  return std::nullopt;
}

std::string_view regex_of_split_pattern(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return {};
}

std::string_view name_of_split_pattern(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2: return "GPT-2";
    case SplitPattern::kLlama3: return "Llama-3";
    case SplitPattern::kQwen2: return "Qwen2";
  }
  return {};
}

std::vector<std::string_view> split_by_pattern(std::string_view text, SplitPattern pattern) {
  const std::u32string cps = decode_utf8(text, "split_by_pattern");
  std::vector<size_t> offsets(cps.size() + 1, 0);  // byte offset of each code point
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t c = cps[i];
    offsets[i + 1] = offsets[i] + (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);
  }
  const Matcher matcher(cps);
  std::vector<std::string_view> pieces;
  size_t gap_start = 0;
  for (size_t i = 0; i < cps.size();) {
    const size_t end = pattern == SplitPattern::kGpt2     ? matcher.gpt2(i)
                       : pattern == SplitPattern::kLlama3 ? matcher.llama3(i, 3)
                                                          : matcher.llama3(i, 1);
    if (end == i) {  // no match here: the character joins the gap before the next match
      ++i;
      continue;
    }
    if (gap_start < i) pieces.push_back(text.substr(offsets[gap_start], offsets[i] - offsets[gap_start]));
    pieces.push_back(text.substr(offsets[i], offsets[end] - offsets[i]));
    i = end;
    gap_start = end;
  }
  if (gap_start < cps.size()) pieces.push_back(text.substr(offsets[gap_start]));
  return pieces;
}

}  // namespace qjoule::tokenize

#include "tokenize/bert_normalizer.h"

#include <array>
#include <cstddef>

#include <utf8proc.h>

#include "tokenize/unicode_classes.h"

namespace qjoule::tokenize {
namespace {

constexpr char32_t kLatinCapitalIWithDotAbove = 0x130;
constexpr char32_t kCombiningDotAbove = 0x307;

int combining_class(char32_t c) {
  return c < 0x300 ? 0 : utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->combining_class;
}

// Canonical decomposition of one code point (NFD without the reordering step).
void append_canonical_decomposition(char32_t c, std::u32string& out) {
  if (c < 0xC0) {  // nothing below U+00C0 decomposes canonically
    out.push_back(c);
    return;
  }
  std::array<utf8proc_int32_t, 8> buffer{};
  int boundclass = 0;
  const utf8proc_ssize_t n =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer.data(),
                              static_cast<utf8proc_ssize_t>(buffer.size()), UTF8PROC_DECOMPOSE, &boundclass);
  if (n <= 0 || static_cast<size_t>(n) > buffer.size()) {  // cannot happen for valid code points
    out.push_back(c);
    return;
  }
  for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back(static_cast<char32_t>(buffer[static_cast<size_t>(i)]));
}

// Canonical ordering of combining marks in out[from, end): stable sort of each run of non-starters
// by combining class.
void canonical_order(std::u32string& out, size_t from) {
  for (size_t i = from + 1; i < out.size(); ++i) {
    const int ccc = combining_class(out[i]);
    if (ccc == 0) continue;
    for (size_t j = i; j > from; --j) {
      const int previous = combining_class(out[j - 1]);
      if (previous <= ccc) break;
      std::swap(out[j - 1], out[j]);
    }
  }
}

void append_lowercase(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= U'A' && c <= U'Z' ? c + (U'a' - U'A') : c);
  } else if (c == kLatinCapitalIWithDotAbove) {  // the one unconditional multi-char lower-casing
    out.push_back(U'i');
    out.push_back(kCombiningDotAbove);
  } else {
    out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
}

}  // namespace

void bert_normalize(std::u32string_view text, const WordPieceOptions& options, std::u32string& out) {
  // Stage 1: clean text and space out CJK ideographs.
  const size_t start = out.size();
  bool any_non_ascii = false;
  for (const char32_t c : text) {
    if (options.clean_text) {
      if (c == 0 || c == 0xFFFD || unicode::is_control(c)) continue;
      if (unicode::is_whitespace(c)) {
        out.push_back(U' ');
        continue;
      }
    }
    if (c >= 0x80) any_non_ascii = true;
    if (options.tokenize_chinese_chars && unicode::is_chinese_char(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  if (!options.lowercase && !(options.strip_accents && any_non_ascii)) return;
  if (!any_non_ascii) {  // ASCII fast path: only lower-casing can change anything
    for (size_t i = start; i < out.size(); ++i) {
      if (out[i] >= U'A' && out[i] <= U'Z') out[i] += U'a' - U'A';
    }
    return;
  }

  // Stage 2 (non-ASCII text): strip accents, then lower-case.
  std::u32string stage(out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  out.resize(start);
  if (options.strip_accents) {
    std::u32string decomposed;
    decomposed.reserve(stage.size() + 8);
    for (const char32_t c : stage) append_canonical_decomposition(c, decomposed);
    canonical_order(decomposed, 0);
    stage.clear();
    for (const char32_t c : decomposed) {
      if (!unicode::is_nonspacing_mark(c)) stage.push_back(c);
    }
  }
  for (const char32_t c : stage) {
    if (options.lowercase) {
      append_lowercase(c, out);
    } else {
      out.push_back(c);
    }
  }
}

}  // namespace qjoule::tokenize

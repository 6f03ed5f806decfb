#include "tokenize/added_token_splitter.h"

#include <algorithm>

#include "qjoule/tokenize/utf8.h"
#include "tokenize/unicode_classes.h"

namespace qjoule::tokenize {
namespace {

// Length of the UTF-8 whitespace character ending at / starting at `at`, or 0.
size_t whitespace_before(std::string_view text, size_t at) {
  size_t start = at;
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) --start;
  if (start == 0) return 0;
  --start;
  const auto c = decode_utf8(text.substr(start, at - start), "added token");
  return c.size() == 1 && unicode::is_whitespace(c[0]) ? at - start : 0;
}

size_t whitespace_after(std::string_view text, size_t at) {
  if (at >= text.size()) return 0;
  const auto lead = static_cast<unsigned char>(text[at]);
  const size_t length = std::min(text.size() - at, size_t{lead < 0x80 ? 1u : lead < 0xE0 ? 2u : lead < 0xF0 ? 3u : 4u});
  const auto c = decode_utf8(text.substr(at, length), "added token");
  return c.size() == 1 && unicode::is_whitespace(c[0]) ? length : 0;
}

}  // namespace

AddedTokenSplitter::AddedTokenSplitter(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
}

std::vector<TextSegment> AddedTokenSplitter::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t plain_start = 0;
  for (size_t at = 0; at < text.size();) {
    const AddedToken* match = nullptr;
    for (const auto& token : tokens_) {
      if (text.compare(at, token.content.size(), token.content) == 0) {
        match = &token;
        break;
      }
    }
    if (!match) {
      ++at;
      continue;
    }
    size_t start = at;
    size_t end = at + match->content.size();
    if (match->lstrip) {
      while (start > plain_start) {
        const size_t n = whitespace_before(text, start);
        if (n == 0) break;
        start -= n;
      }
    }
    if (match->rstrip) {
      for (size_t n = whitespace_after(text, end); n > 0; n = whitespace_after(text, end)) end += n;
    }
    if (start > plain_start) {
      segments.push_back({text.substr(plain_start, start - plain_start), std::nullopt, plain_start});
    }
    segments.push_back({text.substr(start, end - start), match->id, start});
    plain_start = at = end;
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), std::nullopt, plain_start});
  return segments;
}

}  // namespace qjoule::tokenize

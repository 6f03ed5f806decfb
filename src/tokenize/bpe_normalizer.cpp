#include "tokenize/bpe_normalizer.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "qjoule/error.h"

namespace qjoule::tokenize {
namespace {

std::string nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const auto length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (length < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(length));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(length));
}

}  // namespace

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view content) {
  std::string out;
  out.reserve(text.size());
  size_t start = 0;
  for (size_t at = text.find(pattern); !pattern.empty() && at != std::string_view::npos;
       at = text.find(pattern, start)) {
    out.append(text.substr(start, at - start)).append(content);
    start = at + pattern.size();
  }
  out.append(text.substr(start));
  return out;
}

std::string normalize_for_bpe(std::string_view text, const std::vector<NormalizerStep>& steps) {
  std::string out(text);
  for (const auto& step : steps) {
    if (const auto* prepend = std::get_if<PrependNormalizer>(&step)) {
      if (!out.empty()) out = prepend->prepend + out;
    } else if (const auto* replace = std::get_if<ReplaceNormalizer>(&step)) {
      out = replace_all(out, replace->pattern, replace->content);
    } else {
      out = nfc(out);
    }
  }
  return out;
}

}  // namespace qjoule::tokenize

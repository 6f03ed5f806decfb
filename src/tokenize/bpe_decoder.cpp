#include "tokenize/bpe_decoder.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"
#include "tokenize/bpe_normalizer.h"
#include "tokenize/byte_level_alphabet.h"

namespace qjoule::tokenize {
namespace {

const std::string kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

bool is_valid_utf8(std::string_view bytes) {
  try {
    check_utf8(bytes, "");
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead < 0x80) {
      out += bytes[i++];
      continue;
    }
    if (lead >= 0xC2 && lead <= 0xDF)
      need = 1;
    else if (lead == 0xE0) {
      need = 2;
      lo = 0xA0;
    } else if (lead == 0xED) {
      need = 2;
      hi = 0x9F;
    } else if (lead >= 0xE1 && lead <= 0xEF)
      need = 2;
    else if (lead == 0xF0) {
      need = 3;
      lo = 0x90;
    } else if (lead == 0xF4) {
      need = 3;
      hi = 0x8F;
    } else if (lead >= 0xF1 && lead <= 0xF3)
      need = 3;
    size_t j = i + 1;
    bool ok = need > 0;
    for (size_t k = 0; ok && k < need; ++k, ++j) {
      const unsigned char lower = k == 0 ? lo : 0x80, upper = k == 0 ? hi : 0xBF;
      if (j >= bytes.size() || static_cast<unsigned char>(bytes[j]) < lower ||
          static_cast<unsigned char>(bytes[j]) > upper) {
        ok = false;
        break;
      }
    }
    if (ok) {
      out.append(bytes.substr(i, need + 1));
    } else {
      out += kReplacementChar;
    }
    i = ok ? i + need + 1 : std::max(j, i + 1);
  }
  return out;
}

std::vector<std::string> byte_level_decode(const std::vector<std::string>& tokens) {
  std::string bytes;
  for (const auto& token : tokens) {
    // A token with a character outside the alphabet (an added token) is kept as it is.
    std::string mapped;
    bool all_mapped = true;
    for (const char32_t c : decode_utf8(token, "decode")) {
      const auto b = byte_level::byte_of_char(c);
      if (!b) {
        all_mapped = false;
        break;
      }
      mapped += static_cast<char>(*b);
    }
    bytes += all_mapped ? mapped : token;
  }
  return {utf8_lossy(bytes)};
}

std::optional<uint8_t> fallback_byte(const std::string& token) {  // "<0xNN>"
  if (token.size() != 6 || token.rfind("<0x", 0) != 0 || token[5] != '>') return std::nullopt;
  unsigned value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  return static_cast<uint8_t>(value);
}

std::vector<std::string> byte_fallback(const std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string pending;
  const auto flush = [&] {
    if (pending.empty()) return;
    if (is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.push_back(kReplacementChar);
    }
    pending.clear();
  };
  for (const auto& token : tokens) {
    if (const auto b = fallback_byte(token)) {
      pending += static_cast<char>(*b);
    } else {
      flush();
      out.push_back(token);
    }
  }
  flush();
  return out;
}

std::string strip(const std::string& token, const StripDecoder& step) {
  std::u32string chars = decode_utf8(token, "decode");
  size_t start = 0;
  while (start < step.start && start < chars.size() && chars[start] == step.content) ++start;
  size_t stop = 0;
  while (stop < step.stop && stop < chars.size() - start && chars[chars.size() - 1 - stop] == step.content) ++stop;
  std::string out;
  for (size_t i = start; i < chars.size() - stop; ++i) append_utf8(chars[i], out);
  return out;
}

}  // namespace

std::string decode_bpe_tokens(std::vector<std::string> tokens, const std::vector<DecoderStep>& steps) {
  for (const auto& step : steps) {
    if (std::holds_alternative<ByteLevelDecoder>(step)) {
      tokens = byte_level_decode(tokens);
    } else if (const auto* replace = std::get_if<ReplaceDecoder>(&step)) {
      for (auto& token : tokens) token = replace_all(token, replace->pattern, replace->content);
    } else if (std::holds_alternative<ByteFallbackDecoder>(step)) {
      tokens = byte_fallback(tokens);
    } else if (std::holds_alternative<FuseDecoder>(step)) {
      std::string fused;
      for (const auto& token : tokens) fused += token;
      tokens = {fused};
    } else if (const auto* strip_step = std::get_if<StripDecoder>(&step)) {
      for (auto& token : tokens) token = strip(token, *strip_step);
    } else {
      const auto& metaspace = std::get<MetaspaceDecoder>(step);
      for (size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = replace_all(tokens[i], metaspace.replacement, " ");
        if (i == 0 && metaspace.prepend_scheme != PrependScheme::kNever && tokens[i].rfind(' ', 0) == 0) {
          tokens[i].erase(0, 1);
        }
      }
    }
  }
  std::string text;
  for (const auto& token : tokens) text += token;
  return text;
}

}  // namespace qjoule::tokenize

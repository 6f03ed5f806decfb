#include "tokenize/byte_level_alphabet.h"

#include <array>

#include "qjoule/tokenize/utf8.h"

namespace qjoule::tokenize::byte_level {
namespace {

// Printable Latin-1 bytes stand for themselves; the other 68 take U+0100.. in byte order.
std::array<char32_t, 256> make_byte_chars() {
  std::array<char32_t, 256> chars{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    chars[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}

const std::array<char32_t, 256>& byte_chars() {
  static const auto chars = make_byte_chars();
  return chars;
}

}  // namespace

const std::string& char_of_byte(uint8_t byte) {
  static const auto utf8 = [] {
    std::array<std::string, 256> out;
    for (size_t b = 0; b < 256; ++b) append_utf8(byte_chars()[b], out[b]);
    return out;
  }();
  return utf8[byte];
}

std::optional<uint8_t> byte_of_char(char32_t c) {
  if (c < 256) {
    if (byte_chars()[c] == c) return static_cast<uint8_t>(c);
    return std::nullopt;
  }
  for (size_t b = 0; b < 256; ++b) {
    if (byte_chars()[b] == c) return static_cast<uint8_t>(b);
  }
  return std::nullopt;
}

std::string encode_bytes(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char b : bytes) out += char_of_byte(static_cast<uint8_t>(b));
  return out;
}

}  // namespace qjoule::tokenize::byte_level

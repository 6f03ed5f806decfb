#include "qjoule/tokenize/utf8.h"

#include <cstdint>

#include "qjoule/error.h"

namespace qjoule::tokenize {
namespace {

// Decodes one code point starting at text[pos]; returns it and advances pos. Throws on bad input.
char32_t decode_one(std::string_view text, size_t& pos, std::string_view context) {
  const auto byte_at = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const size_t start = pos;
  const uint8_t lead = byte_at(start);
  const auto bad = [&](std::string_view detail) {
    fail("{}: invalid UTF-8 at byte offset {}: {}; expected valid UTF-8 text",
         context.empty() ? std::string_view("text") : context, start, detail);
  };
  if (lead < 0x80) {
    pos = start + 1;
    return lead;
  }
  size_t length = 0;
  char32_t code_point = 0;
  uint8_t second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0Fu;
    if (lead == 0xE0) second_min = 0xA0;  // below: overlong
    if (lead == 0xED) second_max = 0x9F;  // above: UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07u;
    if (lead == 0xF0) second_min = 0x90;  // below: overlong
    if (lead == 0xF4) second_max = 0x8F;  // above: past U+10FFFF
  } else if (lead >= 0x80 && lead <= 0xBF) {
    bad(fmt::format("found continuation byte 0x{:02X} without a lead byte", lead));
  } else {
    bad(fmt::format("found byte 0x{:02X}, which never occurs in UTF-8", lead));
  }
  if (start + length > text.size()) {
    bad(fmt::format("found lead byte 0x{:02X} of a {}-byte sequence cut short by the end of the text", lead, length));
  }
  for (size_t i = 1; i < length; ++i) {
    const uint8_t byte = byte_at(start + i);
    const uint8_t lo = i == 1 ? second_min : uint8_t{0x80};
    const uint8_t hi = i == 1 ? second_max : uint8_t{0xBF};
    if (byte < lo || byte > hi) {
      const bool continuation = byte >= 0x80 && byte <= 0xBF;
      bad(fmt::format("found 0x{:02X} after lead byte 0x{:02X}{}", byte, lead,
                      !continuation  ? " (sequence cut short)"
                      : lead == 0xED ? " (a UTF-16 surrogate)"
                      : lead == 0xF4 ? " (beyond U+10FFFF)"
                                     : " (an overlong encoding)"));
    }
    code_point = (code_point << 6) | (byte & 0x3Fu);
  }
  pos = start + length;
  return code_point;
}

}  // namespace

void check_utf8(std::string_view text, std::string_view context) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
    } else {
      decode_one(text, pos, context);
    }
  }
}

std::u32string decode_utf8(std::string_view text, std::string_view context) {
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) out.push_back(decode_one(text, pos, context));
  return out;
}

void append_utf8(char32_t code_point, std::string& out) {
  const auto put = [&out](uint32_t byte) { out.push_back(static_cast<char>(byte)); };
  const auto cp = static_cast<uint32_t>(code_point);
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xC0 | (cp >> 6));
    put(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    put(0xE0 | (cp >> 12));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  } else {
    put(0xF0 | (cp >> 18));
    put(0x80 | ((cp >> 12) & 0x3F));
    put(0x80 | ((cp >> 6) & 0x3F));
    put(0x80 | (cp & 0x3F));
  }
}

}  // namespace qjoule::tokenize

// Strict UTF-8 decoding (Unicode Table 3-7: no overlongs, no surrogates, nothing past U+10FFFF).
// Errors name the caller's context (a file, or "file:line"), the byte offset and what was wrong.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qjoule::tokenize {

// Throws qjoule::Error "<context>: invalid UTF-8 at byte offset N: <detail>" on the first bad byte.
void check_utf8(std::string_view text, std::string_view context);

// Decodes `text` into code points (same errors as check_utf8).
std::u32string decode_utf8(std::string_view text, std::string_view context);

// Appends the UTF-8 encoding of a valid code point to `out`.
void append_utf8(char32_t code_point, std::string& out);

}  // namespace qjoule::tokenize

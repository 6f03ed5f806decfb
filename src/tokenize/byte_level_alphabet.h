// GPT-2's byte -> unicode alphabet (tokenizers' `bytes_char`): byte-level BPE vocabularies spell
// every byte as a printable character, so that tokens never hold spaces or control bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qjoule::tokenize::byte_level {

// The UTF-8 of the character that stands for `byte` (e.g. ' ' -> "Ġ", '\n' -> "Ċ").
const std::string& char_of_byte(uint8_t byte);
// The byte a character stands for, or nullopt for a character outside the alphabet.
std::optional<uint8_t> byte_of_char(char32_t c);
// Every byte of `bytes` spelled in the alphabet.
std::string encode_bytes(std::string_view bytes);

}  // namespace qjoule::tokenize::byte_level

// A text to score (`--text FILE` of `qjoule ppl` and `qjoule bench`): the whole file, checked once.
#pragma once

#include <string>

namespace qjoule::eval {

// The file's bytes. Fails with one line naming `flag` and the file when it cannot be opened, holds
// nothing but whitespace, or is not valid UTF-8 (with the byte offset of the first bad sequence).
std::string read_text_file(const std::string& path, const std::string& flag = "--text");

}  // namespace qjoule::eval

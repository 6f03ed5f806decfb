// Reads a whole file into memory, with one-line errors naming the file and what it was meant to be.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qjoule::tokenize {

// `what` describes the file for messages, e.g. "vocabulary" or "dataset".
std::string read_file_bytes(const std::filesystem::path& path, std::string_view what);

}  // namespace qjoule::tokenize

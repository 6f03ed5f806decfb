// Making the folder a command writes into: one rule for every `--out`, so that a folder that cannot be
// made (no permission, a read-only or virtual file system, a file in the way) is the user's error in one
// line naming the flag and the folder, not an internal one.
#pragma once

#include <filesystem>
#include <string_view>

namespace qjoule::io {

// Creates `dir` and its missing parents (nothing when it is a folder already); fails with
// "<flag> <dir>: cannot create the folder: <reason>".
void create_output_folder(const std::filesystem::path& dir, std::string_view flag);

}  // namespace qjoule::io

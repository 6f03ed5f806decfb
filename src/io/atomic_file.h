// Whole-file writes that a crash cannot leave half-written: a temporary file beside the target,
// fsync, then rename over it. Readers see the old file or the new one, never a mix.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qjoule::io {

// Fails with "cannot write 'PATH': <strerror>"; the temporary file is removed on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// errno as text ("No such file or directory").
std::string errno_text(int error);

}  // namespace qjoule::io

// Small-file reading for sysfs and /proc: whole-file reads that report errno, and an
// allocation-free read of one unsigned number for the sampler's hot path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qjoule::energy {

struct TextFile {
  bool ok = false;
  int error = 0;  // errno when !ok
  std::string text;
};

TextFile read_text_file(const std::string& path);

// The file's first line without surrounding whitespace, or nullopt when unreadable.
std::optional<std::string> read_trimmed_line(const std::string& path);

std::string_view trim(std::string_view text);
std::optional<std::uint64_t> parse_u64(std::string_view text);
std::optional<double> parse_double(std::string_view text);

// Opens, reads and closes `path`, parsing one decimal unsigned number. Returns 0 on success, an
// errno value on failure (EINVAL when the text is not a number). Allocation-free.
int read_u64_file(const char* path, std::uint64_t& value) noexcept;

std::string errno_text(int error);  // strerror, thread-safe

}  // namespace qjoule::energy

#include "tokenize/file_bytes.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "qjoule/error.h"

namespace qjoule::tokenize {

std::string read_file_bytes(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    fail("{}: {} file not found (expected an existing file)", path.string(), what);
  }
  if (std::filesystem::is_directory(status)) {
    fail("{}: is a directory, expected a {} file", path.string(), what);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open {} file ({})", path.string(), what, std::strerror(errno));
  std::string bytes;
  std::array<char, 1 << 16> chunk{};
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) fail("{}: error while reading {} file", path.string(), what);
  return bytes;
}

}  // namespace qjoule::tokenize

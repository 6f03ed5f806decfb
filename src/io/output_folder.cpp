#include "qjoule/io/output_folder.h"

#include <cerrno>
#include <system_error>

#include "qjoule/error.h"

namespace qjoule::io {

void create_output_folder(const std::filesystem::path& dir, std::string_view flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && !std::filesystem::is_directory(dir, ec) && !ec) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) fail("{} {}: cannot create the folder: {}", flag, dir.string(), ec.message());
}

}  // namespace qjoule::io

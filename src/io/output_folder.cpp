#include "qjoule/io/output_folder.h"

#include <system_error>

#include "qjoule/error.h"

namespace qjoule::io {

void create_output_folder(const std::filesystem::path& dir, std::string_view flag) {
  std::error_code ec;  // a file in the way is ENOTDIR here too
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{} {}: cannot create the folder: {}", flag, dir.string(), ec.message());
}

}  // namespace qjoule::io

#include "test_paths.h"

#include <system_error>

namespace qjoule::test {

std::filesystem::path shared_dir() { return std::filesystem::path(QJOULE_SHARED_DIR).lexically_normal(); }
std::filesystem::path fixtures_dir() { return QJOULE_FIXTURES_DIR; }
std::filesystem::path binary_dir() { return QJOULE_BINARY_DIR; }
std::filesystem::path qjoule_binary() { return binary_dir() / "src" / "cli" / "qjoule"; }

std::filesystem::path temp_dir(const std::string& name) {
  auto dir = binary_dir() / "test-tmp" / name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  return dir;
}

std::filesystem::path shared_data(const std::string& relative) {
  auto path = shared_dir() / "data" / relative;
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? path : std::filesystem::path{};
}

}  // namespace qjoule::test

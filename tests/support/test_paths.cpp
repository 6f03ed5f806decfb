#include "test_paths.h"

#include <cstdlib>
#include <system_error>

namespace qjoule::test {
namespace {

// ctest runs tests side by side: a bench test's measurement of the machine's limits always shares its
// cores, and would never be cached (every bench test measuring again). Tests take it as uncontended
// (QJOULE_TEST_CONTENDED_CORES=0) unless they set the knob themselves; the processes they start
// inherit it.
const bool uncontended_limits = [] { return ::setenv("QJOULE_TEST_CONTENDED_CORES", "0", /*overwrite=*/0) == 0; }();

}  // namespace

std::filesystem::path shared_dir() { return std::filesystem::path(QJOULE_SHARED_DIR).lexically_normal(); }
std::filesystem::path fixtures_dir() { return QJOULE_FIXTURES_DIR; }
std::filesystem::path binary_dir() { return QJOULE_BINARY_DIR; }
std::filesystem::path qjoule_binary() { return binary_dir() / "src" / "cli" / "qjoule"; }

std::filesystem::path temp_dir(const std::string& name) {
  // Under the running test's own folder: ctest runs tests side by side, each in its own process, and two
  // tests asking for the same name (a shared helper's copy of a fixture) must not remove each other's files.
  auto dir = binary_dir() / "test-tmp";
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info(); info != nullptr) {
    std::string test = std::string(info->test_suite_name()) + "." + info->name();
    for (char& c : test)
      if (c == '/') c = '_';
    dir /= test;
  }
  dir /= name;
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

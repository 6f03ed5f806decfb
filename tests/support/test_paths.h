// Where tests find their data, and a helper that skips a test when shared/ is absent.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace qjoule::test {

std::filesystem::path shared_dir();     // ../shared beside the checkout (may not exist)
std::filesystem::path fixtures_dir();   // tests/fixtures in the repo
std::filesystem::path binary_dir();     // the CMake build directory
std::filesystem::path qjoule_binary();  // the built `qjoule` executable
// Fresh and empty, under the build dir, in a folder of the running test's own (Suite.Name): tests that ctest
// runs side by side never share one.
std::filesystem::path temp_dir(const std::string& name);

// Path of a file under shared/data, or empty when shared/ is absent.
std::filesystem::path shared_data(const std::string& relative);

}  // namespace qjoule::test

// Skips the current test, with a clear message, when ../shared (or a file in it) is absent.
#define QJOULE_REQUIRE_SHARED(relative)                                                                       \
  do {                                                                                                        \
    if (::qjoule::test::shared_data(relative).empty())                                                        \
      GTEST_SKIP() << "shared data absent: " << (::qjoule::test::shared_dir() / "data" / (relative)).string() \
                   << " (tests that use ../shared skip without it; CI has it)";                               \
  } while (0)

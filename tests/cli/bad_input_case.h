// One bad-input case of the CLI tests (test_cli_bad_input.cpp, test_cli_bad_calibration.cpp): its
// files built in a folder of its own, qjoule run, and the exit code and the words of the one-line error
// (naming the flag, file or field, what was found and what was expected) asserted.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "run_command.h"
#include "test_paths.h"

namespace qjoule::test {

struct BadInput {
  std::string name;
  std::string command;  // after "qjoule "; TB, TL: the tiny-bert / tiny-llama fixtures; DIR: the case's folder
  std::string expected;
  int exit_code = 1;
  std::function<void(const std::filesystem::path&)> setup = nullptr;
};
void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

inline std::filesystem::path fixture(const std::string& name) { return fixtures_dir() / name; }

inline void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline void expect_one_line_error(const BadInput& c) {
  namespace fs = std::filesystem;
  using ::testing::HasSubstr;
  using ::testing::Not;
  // The suite in the folder's name: two suites' cases of one name (score's and bench --task's
  // encoder_model) run at once under ctest -j and must not share a folder.
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string suite = info != nullptr ? info->test_suite_name() : "";
  for (char& ch : suite)
    if (ch == '/') ch = '_';
  const fs::path dir = temp_dir("cli_bad_" + suite + "_" + c.name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (c.setup) c.setup(dir);
  const auto placed = [&dir](std::string text) {  // DIR, TB and TL filled in
    const auto replace = [&text](const std::string& from, const std::string& to) {
      for (std::string::size_type at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
        text.replace(at, from.size(), to);
    };
    replace("DIR", dir.string());
    replace("TB", fixture("tiny-bert").string());
    replace("TL", fixture("decoders/tiny-llama").string());
    return text;
  };
  const std::string command = placed(c.command);
  const auto r = run_command(qjoule_binary().string() + " " + command);
  EXPECT_EQ(r.exit_code, c.exit_code) << command << "\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr(placed(c.expected))) << command;
  EXPECT_THAT(r.output, Not(HasSubstr("internal error"))) << command;
  const auto error = r.output.find("qjoule: error: ");
  ASSERT_NE(error, std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin() + static_cast<long>(error), r.output.end(), '\n'), 1)
      << "the error is one line: " << r.output;
}

}  // namespace qjoule::test

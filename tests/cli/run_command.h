// Runs a shell command and captures its stdout+stderr and exit status (for CLI tests).
#pragma once

#include <string>

namespace qjoule::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr interleaved
};

CommandResult run_command(const std::string& command);

}  // namespace qjoule::test

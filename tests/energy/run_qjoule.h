// Runs the built `qjoule` binary as a subprocess and captures its exit code, stdout and stderr.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace qjoule::test {

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `env` entries are set for the child (an empty value unsets the variable). When `as_nobody` and
// this process is root, the child drops to uid/gid 65534 first; then `dropped` says whether it could.
ProcessResult run_qjoule(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                         bool as_nobody = false);

// Environment that hides every real sensor: an empty powercap root, no NVML, no perf PMU.
std::map<std::string, std::string> no_sensor_env(const std::string& scratch_dir);

}  // namespace qjoule::test

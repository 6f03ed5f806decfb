// What the `qjoule bench` CLI tests share: an environment with no energy sensor, and the records of a
// results.jsonl as JSON.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qjoule::test {

// No real sensor: an empty powercap root, no NVML, no perf PMU (the machine's own may be a VM's).
inline std::string no_sensors(const std::filesystem::path& dir) {
  return "QJOULE_POWERCAP_ROOT=" + (dir / "none").string() + " QJOULE_NVML_LIB=" + (dir / "none.so").string() +
         " QJOULE_PERF_POWER_ROOT=" + (dir / "none").string() + " ";
}

inline std::vector<nlohmann::json> read_records(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace qjoule::test

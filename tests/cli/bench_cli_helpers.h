// What the CLI tests of `qjoule bench` and the decoder commands share: an environment with no energy
// sensor, the records of a results.jsonl as JSON, a decoder fixture's folder and a small text to score.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.h"

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

// tests/fixtures/decoders/NAME, as a command-line argument.
inline std::string decoder_fixture_dir(const std::string& name) {
  return (fixtures_dir() / "decoders" / name).string();
}

// DIR/text.txt: 40 short lines of English (a few perplexity windows, a calibration's sequences).
inline std::filesystem::path write_sample_text(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "text.txt";
  std::ofstream out(path);
  for (int i = 0; i < 40; ++i)
    out << "The quick brown fox jumps over the lazy dog. It's a small world after all, isn't it? " << i << "\n";
  return path;
}

}  // namespace qjoule::test

#include "cli/format_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::cli {

std::string thousands(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return value < 0 ? "-" + out : out;
}

std::string human_count(double value) {
  constexpr std::array<const char*, 4> kUnits{"", " k", " M", " G"};
  std::size_t u = 0;
  while (std::fabs(value) >= 1000.0 && u + 1 < kUnits.size()) {
    value /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}", value) : fmt::format("{:.1f}{}", value, kUnits[u]);
}

std::string human_bytes(double bytes) {
  constexpr std::array<const char*, 5> kUnits{"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (bytes >= 1024.0 && u + 1 < kUnits.size()) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

void write_output(const std::string& option, const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream file(path);
  if (!file) fail("{} {}: cannot open the file for writing", option, path);
  file << text;
  if (!file) fail("{} {}: write failed", option, path);
}

}  // namespace qjoule::cli

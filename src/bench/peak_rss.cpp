#include "bench/peak_rss.h"

#include <fstream>
#include <sstream>
#include <string>

namespace qjoule::bench {

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

std::optional<std::uint64_t> peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream fields(line.substr(6));
      std::uint64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  }
  return std::nullopt;
}

}  // namespace qjoule::bench

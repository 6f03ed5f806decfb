#include "bench/peak_rss.h"

#include <malloc.h>

#include <fstream>
#include <sstream>
#include <string>

namespace qjoule::bench {

void fix_heap_thresholds() {
  static const bool fixed = [] { return ::mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1; }();
  (void)fixed;
}

void return_freed_memory() { ::malloc_trim(0); }

bool reset_peak_rss() {
  fix_heap_thresholds();
  // Freed memory the allocator still holds (the previous run's model, the FP32 reference) goes back
  // to the system first: otherwise it stays resident and the new high-water mark starts above it.
  return_freed_memory();
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

namespace {

// The "KEY:   N kB" line of a /proc file, in bytes.
std::optional<std::uint64_t> proc_kib_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      std::istringstream fields(line.substr(key.size()));
      std::uint64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> peak_rss_bytes() { return proc_kib_field("/proc/self/status", "VmHWM:"); }
std::optional<std::uint64_t> current_rss_bytes() { return proc_kib_field("/proc/self/status", "VmRSS:"); }
std::optional<std::uint64_t> available_memory_bytes() { return proc_kib_field("/proc/meminfo", "MemAvailable:"); }

}  // namespace qjoule::bench

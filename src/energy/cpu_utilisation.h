// Whole-machine CPU time from /proc/stat, for the cpu-tdp estimate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace qjoule::energy {

struct CpuTimes {
  std::uint64_t busy = 0;   // user + nice + system + irq + softirq + steal (USER_HZ ticks)
  std::uint64_t total = 0;  // busy + idle + iowait
};

std::optional<CpuTimes> read_cpu_times(const std::string& proc_stat = "/proc/stat");

// Busy fraction (0..1) between two readings, or nullopt when no time passed.
std::optional<double> cpu_utilisation(const CpuTimes& before, const CpuTimes& after);

}  // namespace qjoule::energy

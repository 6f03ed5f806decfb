// Whether a measurement of the machine's limits had the CPU to itself: the CPU time that other
// processes (and a hypervisor's steal) took while it ran, from /proc/stat and /proc/self/stat. A peak
// measured while a test suite or another benchmark ran can be a quarter of the machine's, and a cached
// figure that low would make every later run's "% of limit" wrong for a month.
#pragma once

#include <optional>
#include <string>

namespace qjoule::limits {

// CPU time in clock ticks: the machine's (every CPU, busy and idle) and this process's.
struct CpuTimes {
  double machine_busy = 0.0;   // user, nice, system, irq, softirq, steal of every CPU
  double machine_total = 0.0;  // the same plus idle and iowait
  double self = 0.0;           // this process's user + system time
  int cpus = 0;                // CPUs that /proc/stat lists
};

// Reads /proc/stat's first line and /proc/self/stat; nullopt where either cannot be read.
std::optional<CpuTimes> read_cpu_times();

// Cores' worth of CPU time that others took between `before` and `after` beyond the cores that a
// measurement with `threads` threads left free: 0 when the measurement had its cores to itself.
double contending_cores(const CpuTimes& before, const CpuTimes& after, int threads);

// QJOULE_TEST_CONTENDED_CORES (tests): the contention it stands for, nullopt when unset; a value that
// is not a number of cores >= 0 fails in one line.
std::optional<double> forced_contended_cores();

// Above this many cores of contention a measurement is reported as contended (and not cached).
inline constexpr double kContendedCores = 0.15;

// Measures how much of the CPU others took while a measurement ran: construct before it, call
// verdict() after. verdict() is "" when the measurement had its cores to itself (or /proc cannot be
// read), else one line: "other processes used 0.93 cores that its 2 threads needed while it was
// measured".
// QJOULE_TEST_CONTENDED_CORES=X (tests) stands for the measured contention.
class ContentionProbe {
 public:
  explicit ContentionProbe(int threads);
  std::string verdict() const;

 private:
  int threads_;
  std::optional<CpuTimes> before_;
};

}  // namespace qjoule::limits

#include "qjoule/limits/cpu_contention.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "test_knob.h"

namespace qjoule::limits {
namespace {

// /proc/self/stat's utime + stime (fields 14 and 15; the command name in field 2 may hold spaces, so
// fields are counted after its closing parenthesis).
std::optional<double> self_ticks() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  double utime = 0.0, stime = 0.0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  if (!fields) return std::nullopt;
  return utime + stime;
}

}  // namespace

std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  std::string line;
  CpuTimes t;
  bool aggregate = false;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) == 0) {
      std::istringstream fields(line.substr(4));
      // user nice system idle iowait irq softirq steal (guest time is inside user already)
      double v[8] = {};
      for (double& x : v)
        if (!(fields >> x)) return std::nullopt;
      t.machine_busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
      t.machine_total = t.machine_busy + v[3] + v[4];
      aggregate = true;
    } else if (line.rfind("cpu", 0) == 0) {
      ++t.cpus;
    }
  }
  const auto self = self_ticks();
  if (!aggregate || t.cpus == 0 || !self) return std::nullopt;
  t.self = *self;
  return t;
}

double contending_cores(const CpuTimes& before, const CpuTimes& after, int threads) {
  const double total = after.machine_total - before.machine_total;
  if (!(total > 0.0) || after.cpus <= 0) return 0.0;
  const double wall_ticks = total / after.cpus;  // ticks per CPU over the interval
  const double others = (after.machine_busy - before.machine_busy) - (after.self - before.self);
  const double others_cores = std::max(0.0, others) / wall_ticks;
  const double free_cores = std::max(0, after.cpus - threads);
  return std::max(0.0, others_cores - free_cores);
}

std::optional<double> forced_contended_cores() {
  // The test suite runs tests side by side, and a limits test must know whether its measurement is cached.
  return number_knob(
      "QJOULE_TEST_CONTENDED_CORES", [](double cores) { return cores >= 0.0; }, "a number of cores >= 0");
}

ContentionProbe::ContentionProbe(int threads) : threads_(threads), before_(read_cpu_times()) {}

std::string ContentionProbe::verdict() const {
  if (!before_) return "";
  const auto after = read_cpu_times();
  if (!after) return "";
  const double cores = forced_contended_cores().value_or(contending_cores(*before_, *after, threads_));
  if (cores <= kContendedCores) return "";
  return fmt::format("other processes used {:.2f} cores that its {} thread{} needed while it was measured", cores,
                     threads_, threads_ == 1 ? "" : "s");
}

}  // namespace qjoule::limits

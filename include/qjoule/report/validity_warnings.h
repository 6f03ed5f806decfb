// What a reader of a report must know before trusting its numbers: energy that was not measured
// (and why), estimated energy, emulated runs, failed runs and energy windows the sampler flagged.
#pragma once

#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::report {

struct ValidityWarning {
  std::string kind;                // energy-unavailable, energy-estimated, emulated, failed, energy-flagged
  std::string title;               // "Energy unavailable (3 runs)"
  std::vector<std::string> items;  // one line each, naming the runs and the reason
};

// In the order above; kinds with nothing to say are left out. Energy unavailable groups the
// successful runs by reason. A flagged window is a sensor of `energy_window.sensors` whose `valid`
// is false or whose `flags` are not empty (listed as a note when it stayed valid), or a total
// whose `valid` is false.
std::vector<ValidityWarning> validity_warnings(const std::vector<bench::RunRecord>& records);

}  // namespace qjoule::report

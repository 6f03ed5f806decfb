// The energy a run record reports for one measurement window, and totals over a subset of its sensors.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "qjoule/bench/run_record.h"
#include "qjoule/energy/measurement.h"

namespace qjoule::bench::detail {

// The energy of a window: gross (or estimated), the basis per-token and per-inference figures use
// (net of idle when an idle baseline was measured, else gross; the estimate when asked for one), or
// why there is none.
struct WindowEnergy {
  std::optional<double> energy_j, basis_j;
  std::string unavailable;
};

// "" when every sensor of `sensor_ids` in m spans at least 10 of its updates; else why the window's
// energy is no number (principle 1: a window too short for its counter is no measurement): its name and
// duration, the sensor and its update period.
std::string short_window_reason(const energy::Measurement& m, const std::vector<std::string>& sensor_ids);

// From `total` (the window's own total, or one over a subset: total_over); the estimate only when
// allow_estimate and the measurement carries one. None, with short_window_reason, where a sensor of the
// total spans fewer than 10 of its updates.
WindowEnergy window_energy(const energy::Measurement& m, const energy::EnergyTotal& total, bool allow_estimate);
WindowEnergy window_energy(const energy::Measurement& m);  // the window's own total, estimate allowed

// The total over the sensors that count in totals and that `take` accepts (EnergyMeter's rule, on a
// subset): a CPU run leaves GPU boards out, a GPU run keeps its own GPU's board only.
energy::EnergyTotal total_over(const energy::Measurement& m,
                               const std::function<bool(const energy::SensorEnergy&)>& take,
                               const std::string& none_reason);

// The record's energy keys from `total` (the window's own total, or a subset of its sensors): the
// window as energy::to_json gives it, gross and net joules, the method, mean (and, with one sensor,
// peak) power, per inference and per token (net of idle when measured); the CPU-utilisation estimate
// only where `allow_estimate`; else energy_unavailable with every reason.
void fill_record_energy(RunRecord& r, const energy::Measurement& m, const energy::EnergyTotal& total,
                        bool allow_estimate, double sequences, double tokens);
// A CPU run's: the window's own total, leaving out GPU boards where the window has any (said in a note).
void fill_cpu_record_energy(RunRecord& r, const energy::Measurement& m, double sequences, double tokens);

}  // namespace qjoule::bench::detail

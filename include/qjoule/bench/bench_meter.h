// The energy meter of a sweep: which sensors it reads (RAPL and the like for CPU runs; for each GPU a
// cuda run uses, that GPU's NVML sensor, matched by PCI address), started, with an idle baseline when
// a sensor counts in totals. What cannot be measured is said, once, through `note`.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/run_config.h"
#include "qjoule/energy/energy_meter.h"

namespace qjoule::bench {

struct BenchMeterOptions {
  double interval_ms = 10.0;  // sampling period
  std::string power_meter;    // --power-meter file:PATH or cmd:COMMAND
  std::string estimate;       // --energy-estimate cpu-tdp=WATTS (only when nothing measures)
  bool trace = false;         // keep every reading for OUT/traces/
  double idle_s = 5.0;        // idle power measured first (0: none)
};

// Builds and starts the meter for `configs`; fills runner.gpu_energy_sensors / gpu_energy_absent for
// their cuda devices.
std::unique_ptr<energy::EnergyMeter> make_bench_meter(const std::vector<RunConfig>& configs,
                                                      const BenchMeterOptions& options, BenchOptions& runner,
                                                      const std::function<void(const std::string&)>& note);

}  // namespace qjoule::bench

// The one estimate qjoule makes, and only when asked (--energy-estimate cpu-tdp=WATTS): CPU energy
// as TDP x measured CPU utilisation x duration. Always labelled `estimated`, with its method.
#pragma once

#include <optional>
#include <string>

namespace qjoule::energy {

struct CpuTdpEstimate {
  double tdp_w = 0.0;  // the CPU's thermal design power, in watts, as given by the user
};

// Parses "cpu-tdp=WATTS" (e.g. "cpu-tdp=65"). Throws qjoule::Error naming the option otherwise.
CpuTdpEstimate parse_energy_estimate(const std::string& spec);

// The estimate for one window, as it appears in a Measurement.
struct EnergyEstimate {
  double energy_j = 0.0;
  double tdp_w = 0.0;
  double cpu_utilisation = 0.0;  // 0..1, all CPUs, from /proc/stat over the window
  std::string method;            // "cpu-tdp: 65 W x 43.2% CPU utilisation (/proc/stat) x 2.000 s"
};

}  // namespace qjoule::energy

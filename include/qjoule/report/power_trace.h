// Power traces of benchmark runs, as `qjoule energy --trace` writes them: CSV with the header
// `time_s,sensor,energy_j,power_w`, one reading per line (empty cells where a sensor has no such
// value). A report draws power over time per sensor from them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace qjoule::report {

struct PowerSeries {
  std::string sensor;
  std::vector<double> time_s, power_w;  // parallel; power from power_w, else from energy_j deltas
  bool derived_from_energy = false;     // every point came from energy deltas (a counter-only sensor)
};

struct PowerTrace {
  std::vector<PowerSeries> series;  // in order of first appearance
  std::vector<std::string> notes;   // lines that were skipped, sensors with no power, thinning
};

// Reads a trace. A sensor's rows with no power_w give power as the energy difference over the time
// difference between its consecutive readings. Series longer than max_points are thinned evenly
// (noted). A file that cannot be read or whose header is not the expected one fails naming it;
// malformed rows are skipped and counted in notes.
PowerTrace read_power_trace(const std::filesystem::path& path, std::size_t max_points = 2000);

}  // namespace qjoule::report

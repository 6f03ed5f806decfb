// The power trace as CSV, `time_s,sensor,energy_j,power_w`, one row per reading the sampler kept
// (energy: the counter's unwrapped joules since the meter started; power: the reading, if the
// sensor gives one; an absent value is an empty cell). `qjoule energy --trace` writes one for the
// whole command, `qjoule bench --trace` one per run (OUT/traces/<run name>.csv), and `qjoule report`
// plots them. The meter must have been made with MeterOptions::trace_capacity > 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qjoule/energy/energy_meter.h"

namespace qjoule::energy {

class TraceCsvWriter {
 public:
  // An empty path makes a writer that writes nothing. A file that cannot be opened is an error
  // naming `option` (the flag the user gave) and the path.
  TraceCsvWriter(const std::filesystem::path& path, const EnergyMeter& meter, std::string option = "--trace");

  bool enabled() const { return file_.is_open(); }
  // Writes every reading the meter buffered, with time_s relative to origin_ns (steady clock).
  void drain(EnergyMeter& meter, std::int64_t origin_ns);
  void close();  // flushes; a failed write is an error

 private:
  std::filesystem::path path_;
  std::string option_;
  std::ofstream file_;
  std::vector<std::string> ids_;
};

}  // namespace qjoule::energy

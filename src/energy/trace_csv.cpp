#include "qjoule/energy/trace_csv.h"

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::energy {

TraceCsvWriter::TraceCsvWriter(const std::filesystem::path& path, const EnergyMeter& meter, std::string option)
    : path_(path), option_(std::move(option)) {
  if (path.empty()) return;
  file_.open(path);
  if (!file_) fail("{} {}: cannot open the file for writing", option_, path.string());
  for (const auto* info : meter.sensors()) ids_.push_back(info->id);
  file_ << "time_s,sensor,energy_j,power_w\n";
}

void TraceCsvWriter::drain(EnergyMeter& meter, std::int64_t origin_ns) {
  if (!enabled()) return;
  meter.drain_trace([&](const TraceSample& s) {
    file_ << fmt::format("{:.6f},{},{},{}\n", static_cast<double>(s.time_ns - origin_ns) / 1e9, ids_[s.sensor],
                         s.energy_j ? fmt::format("{:.6f}", *s.energy_j) : std::string(),
                         s.power_w ? fmt::format("{:.3f}", *s.power_w) : std::string());
  });
}

void TraceCsvWriter::close() {
  if (!enabled()) return;
  file_.close();
  if (!file_) fail("{} {}: write failed", option_, path_.string());
}

}  // namespace qjoule::energy

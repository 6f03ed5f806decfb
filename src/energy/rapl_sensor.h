// RaplSensor: one RAPL domain (package, core, uncore, DRAM, psys) read from powercap sysfs
// (/sys/class/powercap/intel-rapl:N[:M]/energy_uj; Intel and AMD). Counter in microjoules that
// wraps at max_energy_range_uj.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

class RaplSensor final : public Sensor {
 public:
  RaplSensor(SensorInfo info, std::string energy_path);
  const SensorInfo& info() const noexcept override { return info_; }
  std::size_t read(std::int64_t now_ns, std::span<SensorReading> out) noexcept override;
  std::string describe_error(int error_code) const override;

 private:
  SensorInfo info_;
  std::string energy_path_;
};

struct RaplDiscovery {
  std::vector<std::unique_ptr<Sensor>> sensors;
  std::vector<SensorAbsence> absent;
  bool unreadable = false;  // zones exist but none could be read (try the perf route)
};

// Finds every RAPL zone under `root` (the powercap class directory). Nested domains (core, uncore)
// name their package in nested_in and do not count in totals; psys covers the packages and does
// not count either; DRAM is a separate plane and counts.
RaplDiscovery discover_rapl_sysfs(const std::string& root);

// The message for an energy_uj that cannot be read for lack of permission.
std::string rapl_permission_message(const std::string& energy_path, const std::string& root);

}  // namespace qjoule::energy

// PerfPowerSensor: a RAPL domain read through the perf `power` PMU (perf_event_open), the second
// route where powercap sysfs is absent or unreadable. 64-bit counters, scaled to joules by the
// PMU's own `.scale` file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

class PerfPowerSensor final : public Sensor {
 public:
  PerfPowerSensor(SensorInfo info, int fd);
  ~PerfPowerSensor() override;
  const SensorInfo& info() const noexcept override { return info_; }
  std::size_t read(std::int64_t now_ns, std::span<SensorReading> out) noexcept override;
  std::string describe_error(int error_code) const override;

 private:
  SensorInfo info_;
  int fd_;
};

struct PerfPowerDiscovery {
  std::vector<std::unique_ptr<Sensor>> sensors;
  std::vector<SensorAbsence> absent;
};

// Opens every energy-* event of the PMU at `root` (/sys/bus/event_source/devices/power) on one
// CPU per package (the PMU's cpumask).
PerfPowerDiscovery discover_perf_power(const std::string& root);

}  // namespace qjoule::energy

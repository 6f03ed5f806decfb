#include "qjoule/energy/discovery.h"

#include <cstdlib>

#include "energy/external_meter_sensor.h"
#include "energy/nvml_sensor.h"
#include "energy/perf_power_sensor.h"
#include "energy/rapl_sensor.h"

namespace qjoule::energy {

namespace {

std::string choose(const std::string& option, const char* variable, const char* fallback) {
  if (!option.empty()) return option;
  const char* value = std::getenv(variable);
  if (value != nullptr && *value != '\0') return value;
  return fallback;
}

template <typename Found>
void take(SensorDiscovery& into, Found& found) {
  for (auto& sensor : found.sensors) into.sensors.push_back(std::move(sensor));
  for (auto& absence : found.absent) into.absent.push_back(std::move(absence));
}

}  // namespace

std::optional<unsigned> nvml_index_of_pci_bus_id(const std::string& pci_bus_id, std::string& why_not,
                                                 const std::string& nvml_library) {
  return nvml_index_of_bus_id(choose(nvml_library, "QJOULE_NVML_LIB", "libnvidia-ml.so.1"), pci_bus_id, why_not);
}

SensorDiscovery discover_sensors(const DiscoveryOptions& options) {
  SensorDiscovery found;
  if (options.use_nvml) {
    NvmlDiscovery nvml =
        discover_nvml(choose(options.nvml_library, "QJOULE_NVML_LIB", "libnvidia-ml.so.1"), options.gpus,
                      options.gpus.empty() && options.job_gpus_only ? job_gpus_from_environment() : std::nullopt);
    take(found, nvml);
  }
  if (options.use_rapl) {
    RaplDiscovery rapl =
        discover_rapl_sysfs(choose(options.powercap_root, "QJOULE_POWERCAP_ROOT", "/sys/class/powercap"));
    const bool try_perf = rapl.sensors.empty();
    take(found, rapl);
    if (try_perf) {  // the second route, only where sysfs gave nothing (never both: no double counting)
      PerfPowerDiscovery perf = discover_perf_power(
          choose(options.perf_power_root, "QJOULE_PERF_POWER_ROOT", "/sys/bus/event_source/devices/power"));
      take(found, perf);
    }
  }
  if (!options.power_meter.empty()) {
    found.sensors.push_back(ExternalMeterSensor::open(options.power_meter, options.power_meter_max_gap_s));
  } else {
    found.absent.push_back({"power-meter", "none given (--power-meter file:PATH or cmd:COMMAND reads a wall meter)"});
  }
  return found;
}

}  // namespace qjoule::energy

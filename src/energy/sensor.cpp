#include "qjoule/energy/sensor.h"

#include <fmt/format.h>

namespace qjoule::energy {

std::string_view scope_name(SensorScope scope) {
  switch (scope) {
    case SensorScope::gpu: return "gpu";
    case SensorScope::cpu_package: return "cpu_package";
    case SensorScope::cpu_core: return "cpu_core";
    case SensorScope::cpu_uncore: return "cpu_uncore";
    case SensorScope::dram: return "dram";
    case SensorScope::platform: return "platform";
    case SensorScope::system: return "system";
  }
  return "unknown";
}

std::string Sensor::describe_error(int error_code) const {
  return fmt::format("{}: read failed (code {})", info().id, error_code);
}

}  // namespace qjoule::energy

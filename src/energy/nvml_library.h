// NvmlLibrary: libnvidia-ml loaded with dlopen (no link-time dependency, no nvidia-smi), initialised
// once and shut down when the last GPU sensor is gone.
#pragma once

#include <memory>
#include <string>

#include "energy/nvml_api.h"

namespace qjoule::energy {

class NvmlLibrary {
 public:
  // Loads `path` and calls nvmlInit. On failure returns nullptr and sets `why_not` (one line).
  static std::shared_ptr<NvmlLibrary> open(const std::string& path, std::string& why_not);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const std::string& path() const { return path_; }
  std::string error_text(nvml::Return code) const;  // "Not Supported (NVML error 3)"

  // Required functions (never null after open()).
  nvml::DeviceGetCountFn device_get_count = nullptr;
  nvml::DeviceGetHandleByIndexFn device_get_handle_by_index = nullptr;
  // Optional functions (null when this driver's library lacks them).
  nvml::DeviceGetNameFn device_get_name = nullptr;
  nvml::DeviceGetUUIDFn device_get_uuid = nullptr;
  nvml::DeviceGetArchitectureFn device_get_architecture = nullptr;
  nvml::DeviceGetTotalEnergyConsumptionFn device_get_total_energy_consumption = nullptr;
  nvml::DeviceGetPowerUsageFn device_get_power_usage = nullptr;
  nvml::DeviceGetFieldValuesFn device_get_field_values = nullptr;
  nvml::SystemGetDriverVersionFn system_get_driver_version = nullptr;
  nvml::DeviceGetHandleByPciBusIdFn device_get_handle_by_pci_bus_id = nullptr;
  nvml::DeviceGetIndexFn device_get_index = nullptr;
  nvml::DeviceGetHandleByUUIDFn device_get_handle_by_uuid = nullptr;
  nvml::DeviceIsMigDeviceHandleFn device_is_mig_device_handle = nullptr;
  nvml::DeviceGetDeviceHandleFromMigDeviceHandleFn device_get_device_handle_from_mig_device_handle = nullptr;
  nvml::DeviceGetClockInfoFn device_get_clock_info = nullptr;
  nvml::DeviceGetTemperatureFn device_get_temperature = nullptr;
  nvml::DeviceGetEnforcedPowerLimitFn device_get_enforced_power_limit = nullptr;
  nvml::DeviceGetPersistenceModeFn device_get_persistence_mode = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons, or nvmlDeviceGetCurrentClocksThrottleReasons (older drivers).
  nvml::DeviceGetCurrentClocksEventReasonsFn device_get_current_clocks_event_reasons = nullptr;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
  nvml::ShutdownFn shutdown_ = nullptr;
  nvml::ErrorStringFn error_string_ = nullptr;
  bool initialised_ = false;
};

}  // namespace qjoule::energy

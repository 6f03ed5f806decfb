#include "energy/nvml_library.h"

#include <dlfcn.h>

#include <cstring>

#include <fmt/format.h>

namespace qjoule::energy {

namespace {

template <typename Fn>
Fn symbol(void* handle, const char* name) {
  void* address = ::dlsym(handle, name);
  Fn fn = nullptr;
  static_assert(sizeof(fn) == sizeof(address));
  std::memcpy(&fn, &address, sizeof fn);  // object pointer -> function pointer, as POSIX allows
  return fn;
}

template <typename Fn>
Fn symbol(void* handle, const char* name, const char* fallback) {
  Fn fn = symbol<Fn>(handle, name);
  return fn != nullptr ? fn : symbol<Fn>(handle, fallback);
}

}  // namespace

std::shared_ptr<NvmlLibrary> NvmlLibrary::open(const std::string& path, std::string& why_not) {
  std::shared_ptr<NvmlLibrary> library(new NvmlLibrary());
  library->path_ = path;
  library->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle_ == nullptr) {
    const char* error = ::dlerror();
    why_not = fmt::format("no NVIDIA driver is installed: cannot load {} (dlopen: {})", path,
                          error != nullptr ? error : "failed");
    return nullptr;
  }
  void* h = library->handle_;
  const auto init = symbol<nvml::InitFn>(h, "nvmlInit_v2", "nvmlInit");
  library->shutdown_ = symbol<nvml::ShutdownFn>(h, "nvmlShutdown");
  library->error_string_ = symbol<nvml::ErrorStringFn>(h, "nvmlErrorString");
  library->device_get_count = symbol<nvml::DeviceGetCountFn>(h, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  library->device_get_handle_by_index =
      symbol<nvml::DeviceGetHandleByIndexFn>(h, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  library->device_get_name = symbol<nvml::DeviceGetNameFn>(h, "nvmlDeviceGetName");
  library->device_get_uuid = symbol<nvml::DeviceGetUUIDFn>(h, "nvmlDeviceGetUUID");
  library->device_get_architecture = symbol<nvml::DeviceGetArchitectureFn>(h, "nvmlDeviceGetArchitecture");
  library->device_get_total_energy_consumption =
      symbol<nvml::DeviceGetTotalEnergyConsumptionFn>(h, "nvmlDeviceGetTotalEnergyConsumption");
  library->device_get_power_usage = symbol<nvml::DeviceGetPowerUsageFn>(h, "nvmlDeviceGetPowerUsage");
  library->device_get_field_values = symbol<nvml::DeviceGetFieldValuesFn>(h, "nvmlDeviceGetFieldValues");
  library->system_get_driver_version = symbol<nvml::SystemGetDriverVersionFn>(h, "nvmlSystemGetDriverVersion");
  library->device_get_handle_by_pci_bus_id =
      symbol<nvml::DeviceGetHandleByPciBusIdFn>(h, "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId");
  library->device_get_index = symbol<nvml::DeviceGetIndexFn>(h, "nvmlDeviceGetIndex");
  library->device_get_handle_by_uuid = symbol<nvml::DeviceGetHandleByUUIDFn>(h, "nvmlDeviceGetHandleByUUID");
  library->device_is_mig_device_handle = symbol<nvml::DeviceIsMigDeviceHandleFn>(h, "nvmlDeviceIsMigDeviceHandle");
  library->device_get_device_handle_from_mig_device_handle =
      symbol<nvml::DeviceGetDeviceHandleFromMigDeviceHandleFn>(h, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  library->device_get_clock_info = symbol<nvml::DeviceGetClockInfoFn>(h, "nvmlDeviceGetClockInfo");
  library->device_get_temperature = symbol<nvml::DeviceGetTemperatureFn>(h, "nvmlDeviceGetTemperature");
  library->device_get_enforced_power_limit =
      symbol<nvml::DeviceGetEnforcedPowerLimitFn>(h, "nvmlDeviceGetEnforcedPowerLimit");
  library->device_get_persistence_mode = symbol<nvml::DeviceGetPersistenceModeFn>(h, "nvmlDeviceGetPersistenceMode");
  library->device_get_current_clocks_event_reasons = symbol<nvml::DeviceGetCurrentClocksEventReasonsFn>(
      h, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");

  if (init == nullptr || library->shutdown_ == nullptr || library->device_get_count == nullptr ||
      library->device_get_handle_by_index == nullptr) {
    why_not = fmt::format(
        "{} lacks nvmlInit, nvmlShutdown, nvmlDeviceGetCount or "
        "nvmlDeviceGetHandleByIndex: not a usable NVML library",
        path);
    return nullptr;
  }
  const nvml::Return status = init();
  if (status != nvml::kSuccess) {
    why_not = status == nvml::kErrorDriverNotLoaded
                  ? fmt::format("nvmlInit: the NVIDIA kernel driver is not loaded ({})", library->error_text(status))
              : status == nvml::kErrorNoPermission
                  ? fmt::format(
                        "nvmlInit: no permission to talk to the NVIDIA driver ({}); check "
                        "access to /dev/nvidia*",
                        library->error_text(status))
                  : fmt::format("nvmlInit failed: {}", library->error_text(status));
    return nullptr;
  }
  library->initialised_ = true;
  return library;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_ && shutdown_ != nullptr) shutdown_();
  if (handle_ != nullptr) ::dlclose(handle_);
}

std::string NvmlLibrary::error_text(nvml::Return code) const {
  const char* text = error_string_ != nullptr ? error_string_(code) : nullptr;
  return fmt::format("{} (NVML error {})", text != nullptr ? text : "unknown error", code);
}

}  // namespace qjoule::energy

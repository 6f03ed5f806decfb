// NvmlSensor: one NVIDIA GPU through NVML. Energy from nvmlDeviceGetTotalEnergyConsumption (mJ since
// the driver loaded; Volta and newer), power from the instant power field (NVML field 186) or, where
// that is unavailable, nvmlDeviceGetPowerUsage (mW; a 1-second average on Ampere and newer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "energy/nvml_library.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/job_gpus.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

enum class NvmlPowerRoute { none, instant_field, power_usage };

class NvmlSensor final : public Sensor {
 public:
  NvmlSensor(std::shared_ptr<NvmlLibrary> library, nvml::Device device, SensorInfo info, bool read_energy,
             NvmlPowerRoute power_route);
  const SensorInfo& info() const noexcept override { return info_; }
  std::size_t read(std::int64_t now_ns, std::span<SensorReading> out) noexcept override;
  std::string describe_error(int error_code) const override;
  // SM and memory clocks, temperature, enforced power limit, persistence mode, clock-event reasons.
  std::optional<DeviceState> device_state() const override;
  NvmlPowerRoute power_route() const { return power_route_; }

 private:
  std::shared_ptr<NvmlLibrary> library_;
  nvml::Device device_;
  SensorInfo info_;
  bool read_energy_;
  NvmlPowerRoute power_route_;
};

struct NvmlDiscovery {
  std::vector<std::unique_ptr<Sensor>> sensors;
  std::vector<SensorAbsence> absent;
};

// One sensor per selected GPU: `gpus` (--gpu) when given, else the GPUs of `job` (job_gpus.h) when a
// variable restricts them, else every GPU. A job's MIG instance is an absence (NVML measures whole
// GPUs only); a job entry NVML does not know is an absence naming it. Each sensor says what selected
// it. Throws qjoule::Error for a --gpu index that does not exist.
NvmlDiscovery discover_nvml(const std::string& library_path, const std::vector<unsigned>& gpus,
                            const std::optional<JobGpus>& job = std::nullopt);

// The NVML index of the GPU at `pci_bus_id` (nvmlDeviceGetHandleByPciBusId + nvmlDeviceGetIndex), or
// std::nullopt with `why_not` (no library, a driver without those functions, an unknown address).
std::optional<unsigned> nvml_index_of_bus_id(const std::string& library_path, const std::string& pci_bus_id,
                                             std::string& why_not);

// Converts an NVML field value to a double, or returns false for an unknown value type.
bool field_value_as_double(const nvml::FieldValue& field, double& out) noexcept;

}  // namespace qjoule::energy

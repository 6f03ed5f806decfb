// Finds every energy sensor on this machine and, for each source that is absent, says why.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

struct DiscoveryOptions {
  bool use_nvml = true;
  bool use_rapl = true;        // powercap sysfs, then the perf `power` PMU where sysfs is unreadable
  std::vector<unsigned> gpus;  // NVML device indices to use; empty = the job's GPUs (below), else every GPU
  // With `gpus` empty: only the GPUs CUDA_VISIBLE_DEVICES / SLURM_STEP_GPUS / SLURM_JOB_GPUS give this
  // job (job_gpus.h), so a shared node's other GPUs are never measured as this work's.
  bool job_gpus_only = true;
  std::string power_meter;             // "" (none), "file:PATH" or "cmd:COMMAND" (CSV lines timestamp_s,watts)
  double power_meter_max_gap_s = 2.0;  // meter gaps longer than this count as uncovered time

  // Overrides for tests and unusual systems; empty = the environment variable, then the default.
  std::string powercap_root;    // $QJOULE_POWERCAP_ROOT, else /sys/class/powercap
  std::string nvml_library;     // $QJOULE_NVML_LIB, else libnvidia-ml.so.1
  std::string perf_power_root;  // $QJOULE_PERF_POWER_ROOT, else /sys/bus/event_source/devices/power
};

// A source that gave no sensor, and why ("no device", "no permission: ...", "running in a VM").
struct SensorAbsence {
  std::string source;  // "nvml", "rapl", "rapl-perf", "power-meter"
  std::string reason;  // one line, says what to do where something can be done
};

struct SensorDiscovery {
  std::vector<std::unique_ptr<Sensor>> sensors;
  std::vector<SensorAbsence> absent;
};

// The NVML index (as DiscoveryOptions::gpus and the sensor id "nvml:gpuN" count) of the GPU at PCI
// address `pci_bus_id` ("0000:3B:00.0", as cudaDeviceGetPCIBusId writes it): CUDA's and NVML's
// numbering differ under CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER. std::nullopt, with `why_not` set
// to one line, when NVML is absent or does not know the address. `nvml_library` as in DiscoveryOptions.
std::optional<unsigned> nvml_index_of_pci_bus_id(const std::string& pci_bus_id, std::string& why_not,
                                                 const std::string& nvml_library = "");

// Probes every source. Absent sources are listed, never fatal; a malformed option (an unknown
// --power-meter form, a --gpu index that does not exist) throws qjoule::Error.
SensorDiscovery discover_sensors(const DiscoveryOptions& options);

}  // namespace qjoule::energy

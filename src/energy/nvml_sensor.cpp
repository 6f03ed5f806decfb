#include "energy/nvml_sensor.h"

#include <algorithm>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::energy {

NvmlSensor::NvmlSensor(std::shared_ptr<NvmlLibrary> library, nvml::Device device, SensorInfo info, bool read_energy,
                       NvmlPowerRoute power_route)
    : library_(std::move(library)),
      device_(device),
      info_(std::move(info)),
      read_energy_(read_energy),
      power_route_(power_route) {}

bool field_value_as_double(const nvml::FieldValue& field, double& out) noexcept {
  switch (field.valueType) {
    case nvml::kValueDouble: out = field.value.dVal; return true;
    case nvml::kValueUnsignedInt: out = static_cast<double>(field.value.uiVal); return true;
    case nvml::kValueUnsignedLong: out = static_cast<double>(field.value.ulVal); return true;
    case nvml::kValueUnsignedLongLong: out = static_cast<double>(field.value.ullVal); return true;
    case nvml::kValueSignedLongLong: out = static_cast<double>(field.value.sllVal); return true;
    case nvml::kValueSignedInt: out = static_cast<double>(field.value.siVal); return true;
    case nvml::kValueUnsignedShort: out = static_cast<double>(field.value.usVal); return true;
    default: return false;
  }
}

std::size_t NvmlSensor::read(std::int64_t now_ns, std::span<SensorReading> out) noexcept {
  if (out.empty()) return 0;
  SensorReading& reading = out[0];
  reading = SensorReading{};
  reading.time_ns = now_ns;
  if (read_energy_) {
    unsigned long long millijoules = 0;
    const nvml::Return status = library_->device_get_total_energy_consumption(device_, &millijoules);
    if (status != nvml::kSuccess) {
      reading.ok = false;
      reading.error_code = status;
      return 1;
    }
    reading.counter = millijoules;
    reading.has_counter = true;
  }
  if (power_route_ == NvmlPowerRoute::instant_field) {
    nvml::FieldValue field{};
    field.fieldId = nvml::kFieldPowerInstant;
    field.scopeId = 0;  // the GPU itself
    const nvml::Return status = library_->device_get_field_values(device_, 1, &field);
    double milliwatts = 0.0;
    if (status != nvml::kSuccess || field.nvmlReturn != nvml::kSuccess || !field_value_as_double(field, milliwatts)) {
      reading.ok = false;
      reading.error_code = status != nvml::kSuccess ? status : field.nvmlReturn;
      return 1;
    }
    reading.power_w = milliwatts / 1000.0;
    reading.has_power = true;
  } else if (power_route_ == NvmlPowerRoute::power_usage) {
    unsigned int milliwatts = 0;
    const nvml::Return status = library_->device_get_power_usage(device_, &milliwatts);
    if (status != nvml::kSuccess) {
      reading.ok = false;
      reading.error_code = status;
      return 1;
    }
    reading.power_w = static_cast<double>(milliwatts) / 1000.0;
    reading.has_power = true;
  }
  return 1;
}

std::string NvmlSensor::describe_error(int error_code) const {
  return fmt::format("NVML read of {}: {}", info_.id, library_->error_text(error_code));
}

std::optional<DeviceState> NvmlSensor::device_state() const {
  DeviceState state;
  const NvmlLibrary& nvml = *library_;
  // Calls `fn` when the driver has it; records why not otherwise. Returns whether the value was read.
  const auto read = [&](const char* field, const char* function, bool present, auto&& fn) {
    if (!present) {
      state.unavailable.push_back(fmt::format("{}: this NVML library has no {}", field, function));
      return false;
    }
    const nvml::Return status = fn();
    if (status == nvml::kSuccess) return true;
    state.unavailable.push_back(fmt::format("{}: {}: {}", field, function, nvml.error_text(status)));
    return false;
  };
  unsigned value = 0;
  if (read("sm_clock_mhz", "nvmlDeviceGetClockInfo", nvml.device_get_clock_info != nullptr,
           [&] { return nvml.device_get_clock_info(device_, nvml::kClockSm, &value); }))
    state.sm_clock_mhz = value;
  if (read("memory_clock_mhz", "nvmlDeviceGetClockInfo", nvml.device_get_clock_info != nullptr,
           [&] { return nvml.device_get_clock_info(device_, nvml::kClockMem, &value); }))
    state.memory_clock_mhz = value;
  if (read("temperature_c", "nvmlDeviceGetTemperature", nvml.device_get_temperature != nullptr,
           [&] { return nvml.device_get_temperature(device_, nvml::kTemperatureGpu, &value); }))
    state.temperature_c = value;
  if (read("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", nvml.device_get_enforced_power_limit != nullptr,
           [&] { return nvml.device_get_enforced_power_limit(device_, &value); }))
    state.power_limit_w = static_cast<double>(value) / 1000.0;
  int mode = 0;
  if (read("persistence_mode", "nvmlDeviceGetPersistenceMode", nvml.device_get_persistence_mode != nullptr,
           [&] { return nvml.device_get_persistence_mode(device_, &mode); }))
    state.persistence_mode = mode != 0;
  unsigned long long reasons = 0;
  if (read("clocks_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons",
           nvml.device_get_current_clocks_event_reasons != nullptr,
           [&] { return nvml.device_get_current_clocks_event_reasons(device_, &reasons); })) {
    state.clocks_event_reasons = reasons;
    for (const auto& r : nvml::kClocksEventReasons)
      if ((reasons & r.bit) != 0) state.clocks_event_reason_names.emplace_back(r.name);
  }
  return state;
}

namespace {

std::string device_name(const NvmlLibrary& library, nvml::Device device) {
  if (library.device_get_name == nullptr) return "NVIDIA GPU";
  char name[96] = {};
  if (library.device_get_name(device, name, sizeof name) != nvml::kSuccess) return "NVIDIA GPU";
  return std::string(name);
}

// "GPU-…" (the UUID CUDA_VISIBLE_DEVICES and nvidia-smi name it by), or "" when NVML cannot say.
std::string device_uuid(const NvmlLibrary& library, nvml::Device device) {
  if (library.device_get_uuid == nullptr) return {};
  char uuid[96] = {};
  if (library.device_get_uuid(device, uuid, sizeof uuid) != nvml::kSuccess) return {};
  return std::string(uuid);
}

bool is_ga100(const std::string& name) {
  // GA100 boards (A100, A30) report instantaneous power even though they are Ampere.
  return name.find("A100") != std::string::npos || name.find("A30") != std::string::npos;
}

}  // namespace

std::optional<unsigned> nvml_index_of_bus_id(const std::string& library_path, const std::string& pci_bus_id,
                                             std::string& why_not) {
  std::shared_ptr<NvmlLibrary> library = NvmlLibrary::open(library_path, why_not);
  if (!library) return std::nullopt;
  if (library->device_get_handle_by_pci_bus_id == nullptr || library->device_get_index == nullptr) {
    why_not =
        fmt::format("{} lacks nvmlDeviceGetHandleByPciBusId or nvmlDeviceGetIndex (driver too old)", library->path());
    return std::nullopt;
  }
  nvml::Device device = nullptr;
  nvml::Return status = library->device_get_handle_by_pci_bus_id(pci_bus_id.c_str(), &device);
  if (status != nvml::kSuccess) {
    why_not = fmt::format("nvmlDeviceGetHandleByPciBusId({}) failed: {}", pci_bus_id, library->error_text(status));
    return std::nullopt;
  }
  unsigned int index = 0;
  status = library->device_get_index(device, &index);
  if (status != nvml::kSuccess) {
    why_not = fmt::format("nvmlDeviceGetIndex for {} failed: {}", pci_bus_id, library->error_text(status));
    return std::nullopt;
  }
  return index;
}

// The NVML indices of the job's GPUs; what cannot be one (a MIG instance, an unknown entry) is an
// absence in `found`, and `note` says how the GPUs were chosen.
std::vector<unsigned> job_gpu_indices(const NvmlLibrary& library, unsigned count, const JobGpus& job,
                                      NvmlDiscovery& found, std::string& note) {
  const std::string setting = fmt::format("{}={}", job.variable, job.value);
  note = fmt::format("this job's GPU ({})", setting);
  std::vector<unsigned> indices;
  if (job.entries.empty()) {
    found.absent.push_back({"nvml", fmt::format("{} gives this job no GPU", setting)});
    return indices;
  }
  for (const std::string& entry : job.entries) {
    if (entry.find_first_not_of("0123456789") == std::string::npos) {
      const unsigned long index = std::stoul(entry);
      if (index >= count) {
        found.absent.push_back({"nvml", fmt::format("{}: no GPU {} here (NVML sees {})", setting, entry, count)});
        continue;
      }
      indices.push_back(static_cast<unsigned>(index));
      if (job.indices_in_cuda_order)
        note = fmt::format(
            "this job's GPU ({}; index taken as NVML's, which is CUDA's only with "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID: give GPU UUIDs to be sure)",
            setting);
      continue;
    }
    if (library.device_get_handle_by_uuid == nullptr) {
      found.absent.push_back({"nvml", fmt::format("{}: {} lacks nvmlDeviceGetHandleByUUID (driver too old) to find {}",
                                                  setting, library.path(), entry)});
      continue;
    }
    nvml::Device device = nullptr;
    const nvml::Return status = library.device_get_handle_by_uuid(entry.c_str(), &device);
    if (status != nvml::kSuccess) {
      found.absent.push_back(
          {"nvml", fmt::format("{}: NVML does not know {}: {}", setting, entry, library.error_text(status))});
      continue;
    }
    unsigned int is_mig = 0;
    if (entry.rfind("MIG-", 0) == 0 ||
        (library.device_is_mig_device_handle != nullptr &&
         library.device_is_mig_device_handle(device, &is_mig) == nvml::kSuccess && is_mig != 0)) {
      found.absent.push_back({"nvml:" + entry, fmt::format("{}: {} is a MIG instance; NVML reads energy and power of "
                                                           "whole GPUs only, so its energy is unavailable",
                                                           setting, entry)});
      continue;
    }
    unsigned int index = 0;
    if (library.device_get_index == nullptr || library.device_get_index(device, &index) != nvml::kSuccess) {
      found.absent.push_back({"nvml", fmt::format("{}: no NVML index for {}", setting, entry)});
      continue;
    }
    indices.push_back(index);
  }
  return indices;
}

NvmlDiscovery discover_nvml(const std::string& library_path, const std::vector<unsigned>& gpus,
                            const std::optional<JobGpus>& job) {
  NvmlDiscovery found;
  std::string why_not;
  std::shared_ptr<NvmlLibrary> library = NvmlLibrary::open(library_path, why_not);
  if (!library) {
    found.absent.push_back({"nvml", why_not});
    return found;
  }
  unsigned int count = 0;
  const nvml::Return count_status = library->device_get_count(&count);
  if (count_status != nvml::kSuccess) {
    found.absent.push_back({"nvml", fmt::format("nvmlDeviceGetCount failed: {}", library->error_text(count_status))});
    return found;
  }
  if (count == 0) {
    found.absent.push_back({"nvml", "no NVIDIA GPU: NVML sees 0 devices"});
    return found;
  }
  std::vector<unsigned> selected = gpus;
  std::string selected_by;  // how the GPUs were chosen, when not all and not --gpu
  if (selected.empty() && job) {
    selected = job_gpu_indices(*library, count, *job, found, selected_by);
    if (selected.empty()) return found;
  } else if (selected.empty()) {
    for (unsigned i = 0; i < count; ++i) selected.push_back(i);
  }
  for (unsigned index : selected) {
    if (index >= count) {
      fail("--gpu {}: this machine has {} NVIDIA GPU{} (indices 0 to {})", index, count, count == 1 ? "" : "s",
           count - 1);
    }
  }
  std::sort(selected.begin(), selected.end());
  selected.erase(std::unique(selected.begin(), selected.end()), selected.end());

  for (unsigned index : selected) {
    const std::string id = fmt::format("nvml:gpu{}", index);
    nvml::Device device = nullptr;
    const nvml::Return handle_status = library->device_get_handle_by_index(index, &device);
    if (handle_status != nvml::kSuccess) {
      found.absent.push_back(
          {id, fmt::format("nvmlDeviceGetHandleByIndex({}) failed: {}", index, library->error_text(handle_status))});
      continue;
    }
    const std::string name = device_name(*library, device);
    unsigned int architecture = 0;
    const bool have_architecture = library->device_get_architecture != nullptr &&
                                   library->device_get_architecture(device, &architecture) == nvml::kSuccess;

    SensorInfo info;
    info.id = id;
    info.source = "nvml";
    const std::string uuid = device_uuid(*library, device);
    // Which board, exactly: index, name, UUID, and that it is a whole GPU (a MIG instance is never a
    // sensor: NVML measures whole GPUs only).
    info.description = uuid.empty() ? fmt::format("GPU {}: {} (whole GPU)", index, name)
                                    : fmt::format("GPU {}: {} ({}, whole GPU)", index, name, uuid);
    info.scope = SensorScope::gpu;
    if (!selected_by.empty()) info.notes.push_back("measured as " + selected_by);

    // Energy counter (primary source).
    bool read_energy = false;
    if (library->device_get_total_energy_consumption == nullptr) {
      info.notes.push_back(fmt::format(
          "no energy counter: {} lacks nvmlDeviceGetTotalEnergyConsumption (driver too old)", library->path()));
    } else {
      unsigned long long millijoules = 0;
      const nvml::Return status = library->device_get_total_energy_consumption(device, &millijoules);
      if (status == nvml::kSuccess) {
        read_energy = true;
        info.has_counter = true;
        info.counter_unit_j = 1e-3;
        info.counter_range = 0;  // 64-bit millijoules since the driver loaded
      } else if (status == nvml::kErrorNotSupported) {
        info.notes.push_back(
            fmt::format("no energy counter: nvmlDeviceGetTotalEnergyConsumption is not supported on this GPU "
                        "(it needs Volta or newer): {}",
                        library->error_text(status)));
      } else {
        info.notes.push_back(fmt::format("no energy counter: nvmlDeviceGetTotalEnergyConsumption failed: {}",
                                         library->error_text(status)));
      }
    }

    // Power: the instant field first, then nvmlDeviceGetPowerUsage.
    NvmlPowerRoute route = NvmlPowerRoute::none;
    std::string field_problem;
    if (library->device_get_field_values == nullptr) {
      field_problem = fmt::format("{} lacks nvmlDeviceGetFieldValues", library->path());
    } else {
      nvml::FieldValue field{};
      field.fieldId = nvml::kFieldPowerInstant;
      const nvml::Return status = library->device_get_field_values(device, 1, &field);
      double milliwatts = 0.0;
      if (status != nvml::kSuccess) {
        field_problem = fmt::format("nvmlDeviceGetFieldValues failed: {}", library->error_text(status));
      } else if (field.nvmlReturn != nvml::kSuccess) {
        field_problem = fmt::format("field {} (NVML_FI_DEV_POWER_INSTANT): {}", nvml::kFieldPowerInstant,
                                    library->error_text(field.nvmlReturn));
      } else if (!field_value_as_double(field, milliwatts)) {
        field_problem = fmt::format("field {} has unknown value type {}", nvml::kFieldPowerInstant, field.valueType);
      } else {
        route = NvmlPowerRoute::instant_field;
        info.power_method = "instant (nvmlDeviceGetFieldValues, NVML_FI_DEV_POWER_INSTANT)";
      }
    }
    if (route == NvmlPowerRoute::none) {
      unsigned int milliwatts = 0;
      const nvml::Return status = library->device_get_power_usage != nullptr
                                      ? library->device_get_power_usage(device, &milliwatts)
                                      : nvml::kErrorFunctionNotFound;
      if (status == nvml::kSuccess) {
        route = NvmlPowerRoute::power_usage;
        const bool averaged = have_architecture && architecture >= nvml::kArchAmpere && !is_ga100(name);
        info.power_method = averaged            ? "1-second average (nvmlDeviceGetPowerUsage on Ampere or newer)"
                            : have_architecture ? "instantaneous (nvmlDeviceGetPowerUsage before Ampere, or GA100)"
                                                : "nvmlDeviceGetPowerUsage (architecture unknown: instantaneous "
                                                  "before Ampere, a 1-second average on Ampere and newer)";
        info.notes.push_back(
            fmt::format("instant power unavailable ({}); power comes from {}", field_problem, info.power_method));
        if (averaged) {
          info.notes.push_back(
              "averaged power lags fast changes: the power integral is smoothed, the energy counter is "
              "the primary source");
        }
      } else {
        info.notes.push_back(fmt::format(
            "no power readings: {}; nvmlDeviceGetPowerUsage: {}", field_problem,
            library->device_get_power_usage != nullptr ? library->error_text(status) : "missing from the library"));
      }
    }
    if (route != NvmlPowerRoute::none) {
      info.has_power = true;
      info.power_resolution_w = 1e-3;
    }
    if (!info.has_counter && !info.has_power) {
      std::string reasons;
      for (const auto& note : info.notes) reasons += (reasons.empty() ? "" : "; ") + note;
      found.absent.push_back({id, fmt::format("{} reports neither energy nor power: {}", info.description, reasons)});
      continue;
    }
    if (have_architecture && architecture < nvml::kArchVolta && !info.has_counter) {
      info.notes.push_back("pre-Volta GPU: energy comes from integrating power readings");
    }
    found.sensors.push_back(std::make_unique<NvmlSensor>(library, device, std::move(info), read_energy, route));
  }
  return found;
}

}  // namespace qjoule::energy

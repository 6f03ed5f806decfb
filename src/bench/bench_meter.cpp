#include "qjoule/bench/bench_meter.h"

#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/estimate.h"
#include "qjoule/energy/summary.h"
#include "qjoule/kernels/cuda_device.h"

namespace qjoule::bench {

std::unique_ptr<energy::EnergyMeter> make_bench_meter(const std::vector<RunConfig>& configs, const BenchMeterOptions& o,
                                                      BenchOptions& runner,
                                                      const std::function<void(const std::string&)>& note) {
  energy::DiscoveryOptions discovery;
  // CPU runs: a GPU's idle draw is not this work's energy, so NVML is read only for the GPUs that cuda runs
  // use, each matched with its NVML index by PCI address (CUDA's numbering can differ from NVML's).
  discovery.use_nvml = false;
  for (const auto& c : configs) {
    if (!kernels::is_cuda_device(c.device)) continue;
    const int gpu = kernels::require_cuda_device(c.device);
    if (runner.gpu_energy_sensors.count(gpu) > 0 || runner.gpu_energy_absent.count(gpu) > 0) continue;
    const auto& status = kernels::cuda_device_status();
    const std::string bus = static_cast<std::size_t>(gpu) < status.pci_bus_ids.size()
                                ? status.pci_bus_ids[static_cast<std::size_t>(gpu)]
                                : std::string();
    std::string why = "the CUDA runtime gave no PCI address";
    const std::optional<unsigned> nvml = bus.empty() ? std::nullopt : energy::nvml_index_of_pci_bus_id(bus, why);
    if (!nvml) {
      runner.gpu_energy_absent[gpu] =
          fmt::format("GPU {} ({}) has no NVML match: {}", gpu, bus.empty() ? "?" : bus, why);
      note(fmt::format("energy: {}; its runs get no measured energy", runner.gpu_energy_absent[gpu]));
      continue;
    }
    discovery.use_nvml = true;
    discovery.gpus.push_back(*nvml);
    runner.gpu_energy_sensors[gpu] = fmt::format("nvml:gpu{}", *nvml);
  }
  discovery.power_meter = o.power_meter;
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::nanoseconds(static_cast<std::int64_t>(o.interval_ms * 1e6));
  if (!o.estimate.empty()) meter_options.estimate = energy::parse_energy_estimate(o.estimate);
  if (o.trace) meter_options.trace_capacity = std::size_t{1} << 20;
  auto meter = std::make_unique<energy::EnergyMeter>(energy::discover_sensors(discovery), meter_options);
  meter->start();
  bool counted = false;  // a sensor whose energy goes into totals (psys and nested domains do not)
  for (const auto* s : meter->sensors()) counted |= s->counts_in_total;
  if (meter->sensors().empty()) {
    std::string why;
    for (const auto& absent : meter->absent())
      why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", absent.source, absent.reason);
    note(fmt::format("energy: unavailable ({}){}", why,
                     o.estimate.empty() ? "" : "; an estimate is made, as asked (--energy-estimate), and labelled so"));
  } else if (!counted) {
    note("energy: no sensor here counts in totals (only whole-platform or nested domains); no idle baseline taken");
  } else if (o.idle_s > 0) {
    note(fmt::format("measuring idle power for {} (--idle 0 skips this)", energy::format_seconds(o.idle_s)));
    meter->measure_idle(std::chrono::nanoseconds(static_cast<std::int64_t>(o.idle_s * 1e9)));
  }
  return meter;
}

}  // namespace qjoule::bench

// `qjoule sensors`: every energy sensor found (what it measures, counter or power, resolution,
// update period) and every source not found, with the reason.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/measurement.h"
#include "qjoule/energy/summary.h"
#include "qjoule/error.h"

namespace qjoule::cli {

namespace {

struct SensorsOptions {
  std::vector<unsigned> gpus;
  std::string power_meter;
  double probe_ms = 200.0;
  std::string json_path;
};

void run_sensors(const SensorsOptions& options) {
  energy::DiscoveryOptions discovery;
  discovery.gpus = options.gpus;
  discovery.power_meter = options.power_meter;
  energy::SensorDiscovery found = energy::discover_sensors(discovery);

  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::milliseconds(1);  // fast, to observe update periods
  meter_options.meter_grace = std::chrono::milliseconds(0);
  energy::EnergyMeter meter(std::move(found), meter_options);
  const auto sensors = meter.sensors();
  const bool probe = options.probe_ms > 0 && !sensors.empty();
  if (probe) {
    meter.start();
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(options.probe_ms * 1000)));
    meter.stop();
  }
  const std::vector<energy::SensorStats> stats = meter.sensor_stats();

  std::string text;
  if (sensors.empty()) {
    text += "no energy sensor found: energy will be reported as `unavailable`\n";
  } else {
    text += fmt::format("{} energy sensor{} found", sensors.size(), sensors.size() == 1 ? "" : "s");
    text +=
        probe ? fmt::format(" (observed for {:g} ms, sampling every 1 ms):\n", options.probe_ms) : std::string(":\n");
    for (std::size_t i = 0; i < sensors.size(); ++i) {
      text += energy::format_sensor(*sensors[i], probe ? &stats[i] : nullptr);
    }
  }
  if (!meter.absent().empty()) {
    text += "not found:\n";
    text += energy::format_absences(meter.absent());
  }
  std::fputs(text.c_str(), stdout);

  if (!options.json_path.empty()) {
    nlohmann::json j;
    j["sensors"] = nlohmann::json::array();
    for (std::size_t i = 0; i < sensors.size(); ++i) {
      nlohmann::json s = energy::to_json(*sensors[i]);
      if (probe) {
        s["observed_update_period_s"] = stats[i].observed_update_period_s
                                            ? nlohmann::json(*stats[i].observed_update_period_s)
                                            : nlohmann::json(nullptr);
        s["update_period_is_upper_bound"] = stats[i].update_period_is_upper_bound;
        s["power_now_w"] = stats[i].last_power_w ? nlohmann::json(*stats[i].last_power_w) : nlohmann::json(nullptr);
        s["read_errors"] = stats[i].read_errors;
      }
      j["sensors"].push_back(std::move(s));
    }
    j["unavailable"] = nlohmann::json::array();
    for (const auto& a : meter.absent()) j["unavailable"].push_back({{"source", a.source}, {"reason", a.reason}});
    write_output("--json", options.json_path, j.dump(2) + "\n");
  }
}

}  // namespace

void add_sensors_command(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<SensorsOptions>();
  auto* cmd = app.add_subcommand(
      "sensors",
      "List every energy sensor qjoule can read (NVIDIA GPUs through NVML, CPU RAPL domains through "
      "powercap sysfs or the perf power PMU, an external wall meter) and, for every source not found, "
      "the reason (no device, no permission, running in a VM).");
  cmd->footer(
      "Examples:\n"
      "  qjoule sensors                          # what this machine can measure\n"
      "  qjoule sensors --probe 1000 --gpu 0     # watch GPU 0 for 1 s to observe update periods\n"
      "  qjoule sensors --power-meter 'cmd:my-meter --csv' --json sensors.json\n"
      "Environment: QJOULE_POWERCAP_ROOT (default /sys/class/powercap), QJOULE_NVML_LIB (default\n"
      "libnvidia-ml.so.1), QJOULE_PERF_POWER_ROOT (default /sys/bus/event_source/devices/power).");
  cmd->add_option("--gpu", options->gpus, "NVIDIA GPU indices to list, comma-separated (default: every GPU)")
      ->type_name("N")
      ->delimiter(',');
  cmd->add_option("--power-meter", options->power_meter,
                  "An external meter: file:PATH (a CSV file that grows) or cmd:COMMAND (a command "
                  "printing CSV), lines `timestamp_s,watts` with Unix time in seconds")
      ->type_name("SPEC");
  cmd->add_option("--probe", options->probe_ms,
                  "Sample every sensor for this many milliseconds (every 1 ms) to observe its update "
                  "period and current power; 0 skips")
      ->type_name("MS")
      ->capture_default_str()
      ->check(in_range(0, 60000));
  cmd->add_option("--json", options->json_path, "Also write the list as JSON to FILE (`-` for stdout)")
      ->type_name("FILE");
  cmd->callback([options, &ctx] {
    run_sensors(*options);
    ctx.exit_code = 0;
  });
}

}  // namespace qjoule::cli

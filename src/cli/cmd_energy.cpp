// `qjoule energy [options] -- CMD ARGS...`: runs a command under the energy meter, prints a summary
// (duration, joules per sensor, mean/peak watts, samples, validity) and exits with the command's
// exit code (128 + signal when it was killed).
#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "energy/child_process.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/estimate.h"
#include "qjoule/energy/measurement.h"
#include "qjoule/energy/summary.h"
#include "qjoule/energy/trace_csv.h"
#include "qjoule/error.h"

namespace qjoule::cli {

namespace {

struct EnergyOptions {
  double interval_ms = 10.0;
  double idle_s = 5.0;
  std::string json_path;
  std::string trace_path;
  std::vector<unsigned> gpus;
  std::string power_meter;
  std::string estimate;
  std::vector<std::string> command;
};

struct ChildResult {
  int wait_status = 0;
  rusage usage{};
};

// Waits for the child on a helper thread while this thread drains the trace every 200 ms.
ChildResult wait_for_child(pid_t pid, energy::TraceCsvWriter& trace, energy::EnergyMeter& meter, std::int64_t origin) {
  std::mutex mutex;
  std::condition_variable exited;
  bool done = false;
  ChildResult result;
  std::thread waiter([&] {
    ChildResult r;
    while (::wait4(pid, &r.wait_status, 0, &r.usage) < 0 && errno == EINTR) {
    }
    std::lock_guard lock(mutex);
    result = r;
    done = true;
    exited.notify_all();
  });
  {
    std::unique_lock lock(mutex);
    while (!done) {
      exited.wait_for(lock, std::chrono::milliseconds(200), [&] { return done; });
      if (!done) {
        lock.unlock();
        trace.drain(meter, origin);
        lock.lock();
      }
    }
  }
  waiter.join();
  return result;
}

std::string how_it_ended(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("exited with status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = sigabbrev_np(sig);
    return fmt::format("was killed by signal {}{} (exit code {})", sig,
                       name != nullptr ? fmt::format(" (SIG{})", name) : std::string(), 128 + sig);
  }
  return "ended";
}

nlohmann::json idle_json(const std::optional<energy::IdleBaseline>& idle) {
  if (!idle) return nullptr;
  nlohmann::json j;
  j["duration_s"] = idle->duration_s;
  j["sensors"] = nlohmann::json::array();
  for (const auto& e : idle->sensors) {
    j["sensors"].push_back({{"id", e.sensor_id},
                            {"power_w", e.power_w ? nlohmann::json(*e.power_w) : nlohmann::json(nullptr)},
                            {"unavailable", e.power_w ? nlohmann::json(nullptr) : nlohmann::json(e.unavailable)}});
  }
  j["window"] = energy::to_json(idle->window);
  return j;
}

int run_energy(const EnergyOptions& options) {
  energy::DiscoveryOptions discovery;
  discovery.gpus = options.gpus;
  discovery.power_meter = options.power_meter;
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::nanoseconds(static_cast<std::int64_t>(options.interval_ms * 1e6));
  if (!options.estimate.empty()) meter_options.estimate = energy::parse_energy_estimate(options.estimate);
  if (!options.trace_path.empty()) meter_options.trace_capacity = std::size_t{1} << 18;

  energy::EnergyMeter meter(energy::discover_sensors(discovery), meter_options);
  energy::TraceCsvWriter trace(options.trace_path, meter);
  meter.start();
  const std::int64_t origin = meter.sampler_stats().start_ns;
  const bool have_sensors = !meter.sensors().empty();

  if (options.idle_s > 0 && have_sensors) {
    std::fprintf(stderr, "qjoule energy: measuring idle power for %s (--idle 0 skips this)\n",
                 energy::format_seconds(options.idle_s).c_str());
    meter.measure_idle(std::chrono::nanoseconds(static_cast<std::int64_t>(options.idle_s * 1e9)));
    trace.drain(meter, origin);
  }

  const std::string shown = energy::quoted_command(options.command);
  energy::IgnoreInterrupts ignore_interrupts;
  energy::Window window = meter.begin_window(shown);
  int spawn_error = 0;
  const pid_t pid = energy::spawn_process(options.command, energy::SpawnOptions{}, spawn_error);
  if (pid < 0) {
    meter.cancel_window(window);
    std::fflush(stdout);
    std::fprintf(stderr, "qjoule: error: cannot run `%s`: %s\n", options.command.front().c_str(),
                 std::strerror(spawn_error));
    return spawn_error == ENOENT ? 127 : 126;
  }
  const ChildResult child = wait_for_child(pid, trace, meter, origin);
  energy::Measurement measurement = meter.end_window(window);
  meter.stop();
  trace.drain(meter, origin);
  trace.close();

  const int exit_code = energy::exit_code_from_wait_status(child.wait_status);
  const double user_s = static_cast<double>(child.usage.ru_utime.tv_sec) + child.usage.ru_utime.tv_usec / 1e6;
  const double sys_s = static_cast<double>(child.usage.ru_stime.tv_sec) + child.usage.ru_stime.tv_usec / 1e6;
  std::string summary = fmt::format("qjoule energy: `{}` {} after {} (cpu: user {}, sys {})\n", shown,
                                    how_it_ended(child.wait_status), energy::format_seconds(measurement.duration_s),
                                    energy::format_seconds(user_s), energy::format_seconds(sys_s));
  summary += energy::format_measurement(measurement, meter.idle_baseline());
  std::fflush(stdout);
  std::fputs(summary.c_str(), stderr);

  if (!options.json_path.empty()) {
    nlohmann::json j;
    j["command"] = options.command;
    j["exit_code"] = exit_code;
    j["interval_ms"] = options.interval_ms;
    j["measurement"] = energy::to_json(measurement);
    j["idle_baseline"] = idle_json(meter.idle_baseline());
    j["sensors"] = nlohmann::json::array();
    const auto stats = meter.sensor_stats();
    const auto sensors = meter.sensors();
    for (std::size_t i = 0; i < sensors.size(); ++i) {
      nlohmann::json s = energy::to_json(*sensors[i]);
      s["observed_update_period_s"] = stats[i].observed_update_period_s
                                          ? nlohmann::json(*stats[i].observed_update_period_s)
                                          : nlohmann::json(nullptr);
      s["update_period_is_upper_bound"] = stats[i].update_period_is_upper_bound;
      s["samples"] = stats[i].samples;
      s["read_errors"] = stats[i].read_errors;
      j["sensors"].push_back(std::move(s));
    }
    const energy::SamplerStats sampler = meter.sampler_stats();
    j["sampler"] = {{"period_s", sampler.period_s},          {"ticks_expected", sampler.ticks_expected},
                    {"ticks_taken", sampler.ticks_taken},    {"ticks_missed", sampler.ticks_missed},
                    {"ticks_late", sampler.ticks_late},      {"forced_samples", sampler.forced_samples},
                    {"trace_dropped", sampler.trace_dropped}};
    write_output("--json", options.json_path, j.dump(2) + "\n");
  }
  return exit_code;
}

}  // namespace

void add_energy_command(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<EnergyOptions>();
  auto* cmd = app.add_subcommand(
      "energy",
      "Run a command and measure the energy it takes: every sensor found (GPU, CPU package, DRAM, a "
      "wall meter) is sampled by one thread; the summary gives duration, joules per sensor, mean and "
      "peak watts, samples and validity, and qjoule exits with the command's exit code. Without a "
      "sensor, energy is reported as `unavailable` with the reason (never 0).");
  cmd->footer(
      "Put `--` before the command. Examples:\n"
      "  qjoule energy -- sleep 1\n"
      "  qjoule energy --idle 0 --interval 5 --json run.json --trace run.csv -- ./infer --model m.gguf\n"
      "  qjoule energy --power-meter file:/var/log/wallmeter.csv -- make -j8\n"
      "  qjoule energy --energy-estimate cpu-tdp=65 -- ./bench   # an estimate, labelled as such\n"
      "The summary goes to standard error; the command's own output is untouched.");
  cmd->add_option("--interval", options->interval_ms,
                  "Sampling period in milliseconds (one thread samples every sensor)")
      ->type_name("MS")
      ->capture_default_str()
      ->check(in_range(0.1, 10000));
  cmd->add_option("--idle", options->idle_s,
                  "Seconds of idle power to measure before the command; net energy subtracts it "
                  "(0 skips; skipped anyway when no sensor exists)")
      ->type_name("S")
      ->capture_default_str()
      ->check(in_range(0, 3600));
  cmd->add_option("--json", options->json_path, "Write the measurement as JSON to FILE (`-` for stdout)")
      ->type_name("FILE");
  cmd->add_option("--trace", options->trace_path,
                  "Write every reading as CSV (time_s,sensor,energy_j,power_w) to FILE.csv")
      ->type_name("FILE.csv");
  cmd->add_option("--gpu", options->gpus, "NVIDIA GPU indices to measure, comma-separated (default: all)")
      ->type_name("N")
      ->delimiter(',');
  cmd->add_option("--power-meter", options->power_meter,
                  "An external wall meter: file:PATH or cmd:COMMAND giving CSV lines "
                  "`timestamp_s,watts` (Unix time in seconds)")
      ->type_name("SPEC");
  cmd->add_option("--energy-estimate", options->estimate,
                  "cpu-tdp=WATTS: also estimate CPU energy as TDP x measured CPU utilisation x time "
                  "(always labelled `estimated`; never replaces a measurement)")
      ->type_name("cpu-tdp=WATTS");
  cmd->add_option("command", options->command, "The command to run, and its arguments (after `--`)")
      ->type_name("ARG")
      ->required();
  cmd->callback([options, &ctx] { ctx.exit_code = run_energy(*options); });
}

}  // namespace qjoule::cli

// EnergyMeter: one sampler thread over every discovered sensor, measurement windows, an idle
// baseline, and device-synchronize hooks.
//
//   auto found = qjoule::energy::discover_sensors({});
//   qjoule::energy::EnergyMeter meter(std::move(found));
//   meter.start();
//   meter.measure_idle(std::chrono::seconds(5));          // optional: net energy in every window
//   auto w = meter.begin_window("decode");
//   run_the_work();
//   qjoule::energy::Measurement m = meter.end_window(w);   // per-sensor joules, flags, ...
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/estimate.h"
#include "qjoule/energy/measurement.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

class Sampler;
class EnergyMeter;

struct MeterOptions {
  std::chrono::nanoseconds period = std::chrono::milliseconds(10);  // sampling period
  std::size_t trace_capacity = 0;                                   // readings buffered for drain_trace(); 0 = no trace
  // How long end_window() waits for a self-timed meter's first reading after the window's end.
  std::chrono::milliseconds meter_grace = std::chrono::milliseconds(2000);
  std::optional<CpuTdpEstimate> estimate;  // --energy-estimate cpu-tdp=WATTS
};

// Handle of an open window. Move-only; a window dropped without end_window() is cancelled.
class Window {
 public:
  Window() = default;
  Window(Window&& other) noexcept;
  Window& operator=(Window&& other) noexcept;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window();

  const std::string& name() const { return name_; }
  bool open() const { return meter_ != nullptr; }

 private:
  friend class EnergyMeter;
  EnergyMeter* meter_ = nullptr;
  std::string name_;
  std::uint32_t slot_ = 0;
  std::uint64_t generation_ = 0;
  std::int64_t start_ns_ = 0;
  std::uint64_t cpu_busy_ = 0, cpu_total_ = 0;  // /proc/stat at the start (for the estimate)
  bool cpu_ok_ = false;
  std::vector<std::optional<DeviceState>> states_;  // per sensor, at the start (GPU boards)
};

// Idle power per sensor, measured with nothing running.
struct IdleBaseline {
  struct Entry {
    std::string sensor_id;
    std::optional<double> power_w;
    std::string unavailable;  // why power_w is absent
  };
  double duration_s = 0.0;
  std::vector<Entry> sensors;
  Measurement window;  // the idle window itself (its flags say how trustworthy the baseline is)
};

// What the sampler has done since start().
struct SamplerStats {
  bool running = false;
  double period_s = 0.0;
  std::uint64_t ticks_expected = 0;  // == ticks_taken + ticks_missed
  std::uint64_t ticks_taken = 0;
  std::uint64_t ticks_missed = 0;
  std::uint64_t ticks_late = 0;
  std::uint64_t forced_samples = 0;
  std::uint64_t trace_dropped = 0;  // readings not kept for the trace because its buffer was full
  std::int64_t start_ns = 0;
  std::int64_t stop_ns = 0;  // 0 while running
};

// What was seen of one sensor since start().
struct SensorStats {
  std::string sensor_id;
  std::uint64_t samples = 0;
  std::uint64_t read_errors = 0;
  std::string first_error;  // words for the first failed read, "" if none
  std::uint64_t counter_wraps = 0;
  std::uint64_t counter_resets = 0;
  // Observed refresh period of the device's value (counter changes, or power changes / reading
  // gaps for power-only sensors). When every sample saw a new value the device may be faster
  // than the sampler: then the value is only an upper bound.
  std::optional<double> observed_update_period_s;
  bool update_period_is_upper_bound = false;
  std::optional<double> last_power_w;
};

// One reading as recorded for --trace.
struct TraceSample {
  std::int64_t time_ns = 0;
  std::uint32_t sensor = 0;        // index into EnergyMeter::sensors()
  std::optional<double> energy_j;  // unwrapped counter energy since start()
  std::optional<double> power_w;
};

class EnergyMeter {
 public:
  explicit EnergyMeter(SensorDiscovery found, MeterOptions options = {});
  ~EnergyMeter();
  EnergyMeter(const EnergyMeter&) = delete;
  EnergyMeter& operator=(const EnergyMeter&) = delete;

  // Starts the sampler thread (takes one reading of every sensor before returning). With no
  // sensors no thread runs and windows report `unavailable`.
  void start();
  void stop();  // idempotent; the destructor calls it

  std::vector<const SensorInfo*> sensors() const;
  const std::vector<SensorAbsence>& absent() const { return absent_; }
  const MeterOptions& options() const { return options_; }

  // A GPU backend registers its "synchronize device" call here; begin_window() and end_window()
  // run every hook before taking their timestamps so queued device work is inside the window.
  void add_synchronize_hook(std::string label, std::function<void()> hook);
  // Removes every hook registered under `label` (a model that leaves its GPU); returns how many.
  std::size_t remove_synchronize_hook(const std::string& label);

  Window begin_window(std::string name);
  Measurement end_window(Window& window);  // the window is closed afterwards
  void cancel_window(Window& window);

  // Measures idle power for `duration` (sleeping), keeps it as the baseline for every later window
  // (net energy), and returns it.
  const IdleBaseline& measure_idle(std::chrono::nanoseconds duration);
  void set_idle_baseline(IdleBaseline baseline);
  const std::optional<IdleBaseline>& idle_baseline() const { return idle_; }

  SamplerStats sampler_stats() const;
  std::vector<SensorStats> sensor_stats() const;

  // Hands every buffered trace reading to `sink`, oldest first, and returns how many.
  std::size_t drain_trace(const std::function<void(const TraceSample&)>& sink);

 private:
  void run_synchronize_hooks();
  std::vector<std::string> hook_labels() const;

  std::vector<std::unique_ptr<Sensor>> owned_;
  std::vector<SensorAbsence> absent_;
  MeterOptions options_;
  std::unique_ptr<Sampler> sampler_;
  std::vector<std::pair<std::string, std::function<void()>>> hooks_;
  std::optional<IdleBaseline> idle_;
};

}  // namespace qjoule::energy

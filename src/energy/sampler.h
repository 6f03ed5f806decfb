// The one sampler thread: polls every sensor at a fixed period against absolute deadlines, keeps
// each sensor's running (Cumulative) state, resolves window boundaries as samples arrive, and
// accounts for every deadline (taken, late, missed). Its loop never allocates: every buffer is
// sized when the Sampler is built.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "energy/cumulative.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

struct SamplerOptions {
  std::chrono::nanoseconds period = std::chrono::milliseconds(10);
  std::size_t trace_capacity = 0;
};

struct TickCounters {
  std::uint64_t taken = 0;
  std::uint64_t missed = 0;
  std::uint64_t late = 0;
  std::uint64_t forced = 0;
};

// One sensor's share of a closed window.
struct SensorWindowResult {
  Cumulative start;
  Cumulative end;
  std::optional<double> peak_w;
  bool end_extrapolated = false;
  std::optional<double> update_period_s;      // observed period at the window's end
  bool update_period_is_upper_bound = false;  // every sample saw a new value
};

struct WindowResult {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::vector<SensorWindowResult> sensors;
  TickCounters ticks;  // during the window
};

class Sampler {
 public:
  static constexpr std::size_t kMaxOpenWindows = 64;
  static constexpr std::size_t kMaxReadingsPerPoll = 256;  // for self-timed sensors

  Sampler(std::vector<Sensor*> sensors, SamplerOptions options);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  void start();  // returns after the first tick
  void stop();
  bool running() const;
  std::chrono::nanoseconds period() const { return period_; }

  struct Ticket {
    std::uint32_t slot = 0;
    std::uint64_t generation = 0;
    std::int64_t start_ns = 0;
  };
  Ticket open_window();  // the start time is taken under the sampler's lock
  WindowResult close_window(const Ticket& ticket, std::chrono::nanoseconds self_timed_grace);
  void cancel_window(const Ticket& ticket);

  SamplerStats stats() const;
  struct TrackStats {
    std::uint64_t samples = 0, errors = 0, wraps = 0, resets = 0;
    int first_error_code = 0;
    bool has_error = false;
    std::optional<double> update_period_s;
    bool update_period_is_upper_bound = false;
    std::optional<double> last_power_w;
  };
  std::vector<TrackStats> track_stats() const;
  std::size_t drain_trace(const std::function<void(const TraceSample&)>& sink);

  static std::int64_t now_ns();

 private:
  struct Track {
    bool started = false;
    Cumulative last;
    std::uint64_t last_raw = 0;
    std::uint64_t counter_units = 0;  // unwrapped counter since the first sample
    std::int64_t max_gap_ns = 0;
    // Counter-derived power for the peak of counter-only sensors.
    std::int64_t agg_start_ns = 0;
    double agg_start_j = 0.0;
    // Update-period observation.
    std::uint64_t changes = 0;
    std::int64_t first_change_ns = 0;
    std::int64_t last_change_ns = 0;
    bool unchanged_seen = false;
    bool has_error = false;
    int first_error_code = 0;
  };
  struct Slot {
    bool open = false;
    bool end_set = false;
    std::uint64_t generation = 1;
    std::int64_t t0 = 0;
    std::int64_t t1 = 0;
    std::vector<std::uint8_t> start_done, end_done, has_peak;
    std::vector<Cumulative> start, end;
    std::vector<double> peak;
    TickCounters ticks_at_start;
  };
  struct TraceRecord {
    std::int64_t time_ns;
    std::uint32_t sensor;
    bool has_energy, has_power;
    double energy_j, power_w;
  };

  void run();
  void process_reading(std::size_t s, const SensorReading& reading);
  void process_error(std::size_t s, const SensorReading& reading);
  void resolve_boundaries(std::size_t s, const Track& before, const Cumulative& now_state, bool have_prev,
                          std::optional<double> power_for_peak);
  void update_counter_peak(std::size_t s, std::int64_t t);
  std::optional<double> update_period_locked(std::size_t s) const;
  void finish_unresolved_locked(Slot& slot, WindowResult& result);
  Slot& slot_for(const Ticket& ticket);

  std::vector<Sensor*> sensors_;
  std::chrono::nanoseconds period_;
  std::int64_t period_ns_ = 0;
  std::int64_t derived_power_interval_ns_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // wakes the sampler (forced tick, stop)
  std::condition_variable done_;  // wakes waiters after each tick
  std::thread thread_;
  bool thread_running_ = false;
  bool stop_requested_ = false;
  std::uint64_t forced_requested_ = 0;
  std::uint64_t forced_done_ = 0;
  // forced_done_ as published after each tick, for close_window's short spin without the mutex.
  std::atomic<std::uint64_t> forced_done_published_{0};
  std::uint64_t ticks_done_ = 0;

  std::int64_t start_ns_ = 0;
  std::int64_t stop_ns_ = 0;
  TickCounters ticks_;

  std::vector<Track> tracks_;
  std::vector<SensorReading> scratch_;
  std::vector<std::size_t> scratch_offset_, scratch_size_, scratch_count_;
  std::vector<Slot> slots_;

  std::vector<TraceRecord> trace_;
  std::size_t trace_head_ = 0;  // next record to drain
  std::size_t trace_count_ = 0;
  std::uint64_t trace_dropped_ = 0;
};

}  // namespace qjoule::energy

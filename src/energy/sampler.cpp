#include "energy/sampler.h"

#include <algorithm>
#include <cmath>

#include "energy/nanoseconds.h"
#include "qjoule/error.h"

namespace qjoule::energy {

namespace {

double seconds(std::int64_t ns) { return static_cast<double>(ns) / kNsPerS; }

std::chrono::steady_clock::time_point to_time_point(std::int64_t ns) {
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(ns)));
}

// The state of a sensor that has produced no sample yet.
Cumulative nothing_at(std::int64_t time_ns, std::uint64_t errors) {
  Cumulative at;
  at.time_ns = time_ns;
  at.errors = errors;
  return at;
}

TickCounters difference(const TickCounters& later, const TickCounters& earlier) {
  return {later.taken - earlier.taken, later.missed - earlier.missed, later.late - earlier.late,
          later.forced - earlier.forced};
}

}  // namespace

std::int64_t Sampler::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Sampler::Sampler(std::vector<Sensor*> sensors, SamplerOptions options)
    : sensors_(std::move(sensors)), period_(options.period), period_ns_(options.period.count()) {
  if (period_ns_ <= 0) fail("energy sampler: period must be positive, got {} ns", period_ns_);
  const std::size_t n = sensors_.size();
  tracks_.resize(n);
  scratch_offset_.resize(n);
  scratch_size_.resize(n);
  scratch_count_.resize(n);
  std::size_t total = 0;
  for (std::size_t s = 0; s < n; ++s) {
    const SensorInfo& info = sensors_[s]->info();
    scratch_offset_[s] = total;
    scratch_size_[s] = info.self_timed ? kMaxReadingsPerPoll : 1;
    total += scratch_size_[s];
    Track& track = tracks_[s];
    if (info.self_timed) {
      track.max_gap_ns = static_cast<std::int64_t>(std::max(info.max_gap_s, 0.0) * kNsPerS);
    } else {
      // A polled sensor's gap is a hole past 5 periods and 50 ms: a missed deadline or two is
      // bridged by interpolation (and counted in the sampler's accounting), a stall is not.
      track.max_gap_ns = std::max<std::int64_t>(5 * period_ns_, 50'000'000);
    }
  }
  scratch_.resize(total);
  // Counter-derived power (for the peak of counter-only sensors) is taken over intervals of at
  // least one sampling period and 10 ms, so that RAPL's ~1 ms counter steps move it by ~10% at most.
  derived_power_interval_ns_ = std::max<std::int64_t>(period_ns_, 10'000'000);
  slots_.resize(kMaxOpenWindows);
  for (Slot& slot : slots_) {
    slot.start_done.assign(n, 0);
    slot.end_done.assign(n, 0);
    slot.has_peak.assign(n, 0);
    slot.start.assign(n, Cumulative{});
    slot.end.assign(n, Cumulative{});
    slot.peak.assign(n, 0.0);
  }
  trace_.resize(options.trace_capacity);
}

Sampler::~Sampler() { stop(); }

bool Sampler::running() const {
  std::lock_guard lock(mutex_);
  return thread_running_;
}

void Sampler::start() {
  std::unique_lock lock(mutex_);
  if (thread_running_ || stop_ns_ != 0) return;
  start_ns_ = now_ns();
  if (sensors_.empty()) return;  // nothing to sample: windows only keep time
  stop_requested_ = false;
  thread_running_ = true;
  thread_ = std::thread([this] { run(); });
  done_.wait(lock, [this] { return ticks_done_ > 0; });
}

void Sampler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!thread_running_) {
      if (stop_ns_ == 0 && start_ns_ != 0) stop_ns_ = now_ns();
      return;
    }
    stop_requested_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::lock_guard lock(mutex_);
  thread_running_ = false;
  done_.notify_all();
}

void Sampler::run() {
  std::unique_lock lock(mutex_);
  std::int64_t k = 0;  // index of the next deadline: start_ns_ + k * period
  while (true) {
    const std::int64_t deadline = start_ns_ + k * period_ns_;
    wake_.wait_until(lock, to_time_point(deadline),
                     [this] { return stop_requested_ || forced_requested_ > forced_done_; });
    if (stop_requested_) break;
    const std::int64_t woke = now_ns();
    const bool scheduled = woke >= deadline;
    const std::uint64_t forced_seq = forced_requested_;
    lock.unlock();

    for (std::size_t s = 0; s < sensors_.size(); ++s) {
      std::span<SensorReading> out(scratch_.data() + scratch_offset_[s], scratch_size_[s]);
      scratch_count_[s] = sensors_[s]->read(now_ns(), out);
    }

    lock.lock();
    for (std::size_t s = 0; s < sensors_.size(); ++s) {
      const SensorReading* readings = scratch_.data() + scratch_offset_[s];
      for (std::size_t i = 0; i < scratch_count_[s] && i < scratch_size_[s]; ++i) {
        if (readings[i].ok) {
          process_reading(s, readings[i]);
        } else {
          process_error(s, readings[i]);
        }
      }
    }
    if (scheduled) {
      ++ticks_.taken;
      if (woke - deadline > period_ns_ / 2) ++ticks_.late;
      ++k;
      // A deadline is missed when the one after it has already passed by the time we are free.
      const std::int64_t free_at = now_ns();
      while (start_ns_ + (k + 1) * period_ns_ <= free_at) {
        ++ticks_.missed;
        ++k;
      }
    } else {
      ++ticks_.forced;
    }
    forced_done_ = std::max(forced_done_, forced_seq);
    forced_done_published_.store(forced_done_, std::memory_order_release);
    ++ticks_done_;
    done_.notify_all();
  }
  stop_ns_ = now_ns();
  while (start_ns_ + k * period_ns_ <= stop_ns_) {  // deadlines that passed while stopping
    ++ticks_.missed;
    ++k;
  }
}

void Sampler::process_error(std::size_t s, const SensorReading& reading) {
  Track& track = tracks_[s];
  if (!track.has_error) {
    track.has_error = true;
    track.first_error_code = reading.error_code;
  }
  ++track.last.errors;
  // A failing sensor still lets window boundaries pass: its state is held from the last sample.
  const std::int64_t t = reading.time_ns;
  for (Slot& slot : slots_) {
    if (!slot.open) continue;
    if (!slot.start_done[s] && slot.t0 <= t) {
      slot.start[s] =
          track.started ? extrapolate(track.last, slot.t0, track.max_gap_ns) : nothing_at(slot.t0, track.last.errors);
      slot.start_done[s] = 1;
    }
    if (slot.end_set && !slot.end_done[s] && slot.t1 <= t) {
      slot.end[s] =
          track.started ? extrapolate(track.last, slot.t1, track.max_gap_ns) : nothing_at(slot.t1, track.last.errors);
      slot.end_done[s] = 1;
    }
  }
}

void Sampler::process_reading(std::size_t s, const SensorReading& reading) {
  Track& track = tracks_[s];
  const SensorInfo& info = sensors_[s]->info();
  const std::int64_t t = reading.time_ns;
  if (track.started && t <= track.last.time_ns) return;  // out of order (self-timed): ignore

  const Track before = track;  // trivially copyable: no allocation
  Cumulative now_state;
  bool changed = false;
  std::optional<double> power_for_peak;
  if (!track.started) {
    now_state.time_ns = t;
    now_state.samples = 1;
    now_state.errors = track.last.errors;
    track.last_raw = reading.counter;
    track.started = true;
    track.agg_start_ns = t;
    track.agg_start_j = 0.0;
    changed = info.self_timed;
  } else {
    now_state = track.last;
    now_state.time_ns = t;
    const std::int64_t gap = t - track.last.time_ns;
    if (info.has_counter && reading.has_counter) {
      const std::uint64_t delta =
          counter_delta(track.last_raw, reading.counter, info.counter_range, now_state.wraps, now_state.resets);
      changed = reading.counter != track.last_raw;
      track.counter_units += delta;
      track.last_raw = reading.counter;
      now_state.counter_j = static_cast<double>(track.counter_units) * info.counter_unit_j;
    } else if (info.self_timed) {
      changed = true;
    } else if (reading.has_power) {
      changed = !track.last.has_power || reading.power_w != track.last.power_w;
    }
    // A gap longer than the limit is a hole: neither integrated nor covered (never guessed).
    if (gap <= track.max_gap_ns) {
      now_state.covered_s += seconds(gap);
      if (reading.has_power && track.last.has_power) {
        now_state.integral_j += seconds(gap) * (track.last.power_w + reading.power_w) / 2.0;
      }
    }
    ++now_state.samples;
  }
  now_state.power_w = reading.power_w;
  now_state.has_power = reading.has_power;
  if (reading.has_power) power_for_peak = reading.power_w;

  if (changed) {
    if (track.changes == 0) track.first_change_ns = t;
    track.last_change_ns = t;
    ++track.changes;
  } else if (track.changes > 0) {
    track.unchanged_seen = true;
  }
  track.last = now_state;

  resolve_boundaries(s, before, now_state, before.started, power_for_peak);
  if (!info.has_power && info.has_counter) update_counter_peak(s, t);

  if (!trace_.empty()) {
    if (trace_count_ == trace_.size()) {
      ++trace_dropped_;
    } else {
      TraceRecord& record = trace_[(trace_head_ + trace_count_) % trace_.size()];
      record = {
          t, static_cast<std::uint32_t>(s), info.has_counter, reading.has_power, now_state.counter_j, reading.power_w};
      ++trace_count_;
    }
  }
}

void Sampler::resolve_boundaries(std::size_t s, const Track& before, const Cumulative& now_state, bool have_prev,
                                 std::optional<double> power_for_peak) {
  const std::int64_t t = now_state.time_ns;
  const std::int64_t max_gap = before.max_gap_ns;
  for (Slot& slot : slots_) {
    if (!slot.open) continue;
    if (!slot.start_done[s] && slot.t0 <= t) {
      slot.start[s] =
          have_prev ? interpolate(before.last, now_state, slot.t0, max_gap) : before_first(now_state, slot.t0);
      slot.start_done[s] = 1;
    }
    if (slot.start_done[s] && !slot.end_done[s] && power_for_peak && t >= slot.t0 && (!slot.end_set || t <= slot.t1)) {
      if (!slot.has_peak[s] || *power_for_peak > slot.peak[s]) slot.peak[s] = *power_for_peak;
      slot.has_peak[s] = 1;
    }
    if (slot.end_set && !slot.end_done[s] && slot.t1 <= t) {
      slot.end[s] =
          have_prev ? interpolate(before.last, now_state, slot.t1, max_gap) : before_first(now_state, slot.t1);
      slot.end_done[s] = 1;
    }
  }
}

void Sampler::update_counter_peak(std::size_t s, std::int64_t t) {
  Track& track = tracks_[s];
  const std::int64_t span = t - track.agg_start_ns;
  if (span < derived_power_interval_ns_) return;
  const double power = (track.last.counter_j - track.agg_start_j) / seconds(span);
  for (Slot& slot : slots_) {
    if (!slot.open || !slot.start_done[s] || slot.end_done[s]) continue;
    if (track.agg_start_ns < slot.t0 || (slot.end_set && t > slot.t1)) continue;
    if (!slot.has_peak[s] || power > slot.peak[s]) slot.peak[s] = power;
    slot.has_peak[s] = 1;
  }
  track.agg_start_ns = t;
  track.agg_start_j = track.last.counter_j;
}

std::optional<double> Sampler::update_period_locked(std::size_t s) const {
  const Track& track = tracks_[s];
  if (track.changes >= 2 && track.last_change_ns > track.first_change_ns) {
    return seconds(track.last_change_ns - track.first_change_ns) / static_cast<double>(track.changes - 1);
  }
  return std::nullopt;
}

Sampler::Ticket Sampler::open_window() {
  std::lock_guard lock(mutex_);
  if (start_ns_ == 0) fail("energy meter: begin_window() before start()");
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.open) continue;
    slot.open = true;
    slot.end_set = false;
    std::fill(slot.start_done.begin(), slot.start_done.end(), 0);
    std::fill(slot.end_done.begin(), slot.end_done.end(), 0);
    std::fill(slot.has_peak.begin(), slot.has_peak.end(), 0);
    slot.t0 = now_ns();
    slot.ticks_at_start = ticks_;
    // Every sample processed so far was taken before t0 (the sampler takes its times before it
    // takes this lock), so each boundary is resolved by a later sample, or held if none comes.
    if (!thread_running_) {
      for (std::size_t s = 0; s < tracks_.size(); ++s) {
        slot.start[s] =
            tracks_[s].started ? extrapolate(tracks_[s].last, slot.t0, tracks_[s].max_gap_ns) : nothing_at(slot.t0, 0);
        slot.start_done[s] = 1;
      }
    }
    return Ticket{i, slot.generation, slot.t0};
  }
  fail("energy meter: {} windows are open at once; end_window() the ones that are done", slots_.size());
}

Sampler::Slot& Sampler::slot_for(const Ticket& ticket) {
  if (ticket.slot >= slots_.size() || !slots_[ticket.slot].open ||
      slots_[ticket.slot].generation != ticket.generation) {
    fail("energy meter: window is not open (already ended or cancelled)");
  }
  return slots_[ticket.slot];
}

void Sampler::cancel_window(const Ticket& ticket) {
  std::lock_guard lock(mutex_);
  if (ticket.slot >= slots_.size()) return;
  Slot& slot = slots_[ticket.slot];
  if (!slot.open || slot.generation != ticket.generation) return;
  slot.open = false;
  ++slot.generation;
}

void Sampler::finish_unresolved_locked(Slot& slot, WindowResult& result) {
  for (std::size_t s = 0; s < tracks_.size(); ++s) {
    const Track& track = tracks_[s];
    if (!slot.start_done[s]) {  // no sample at all since the window began
      slot.start[s] = track.started ? extrapolate(track.last, slot.t0, track.max_gap_ns) : nothing_at(slot.t0, 0);
      slot.start_done[s] = 1;
    }
    if (!slot.end_done[s]) {
      slot.end[s] = track.started ? extrapolate(track.last, slot.t1, track.max_gap_ns) : nothing_at(slot.t1, 0);
      slot.end_done[s] = 1;
      result.sensors[s].end_extrapolated = true;
    }
  }
}

namespace {
constexpr std::chrono::microseconds kForcedTickSpin{200};
}  // namespace

WindowResult Sampler::close_window(const Ticket& ticket, std::chrono::nanoseconds self_timed_grace) {
  std::unique_lock lock(mutex_);
  Slot& slot = slot_for(ticket);
  slot.t1 = now_ns();
  slot.end_set = true;
  WindowResult result;
  result.start_ns = slot.t0;
  result.end_ns = slot.t1;
  result.sensors.resize(tracks_.size());

  if (thread_running_) {
    // One forced tick resolves every polled sensor; self-timed ones get up to the grace period.
    const std::uint64_t request = ++forced_requested_;
    wake_.notify_all();
    // The forced tick usually lands within tens of microseconds: wait for it spinning (up to
    // kForcedTickSpin, without the mutex) rather than sleeping, which would add a second thread wake-up
    // to every window's end; then sleep on the condition variable as before.
    lock.unlock();
    const auto spin_until = std::chrono::steady_clock::now() + kForcedTickSpin;
    while (forced_done_published_.load(std::memory_order_acquire) < request &&
           std::chrono::steady_clock::now() < spin_until) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    lock.lock();
    done_.wait(lock, [&] { return forced_done_ >= request || !thread_running_; });
    const auto give_up = std::chrono::steady_clock::now() + self_timed_grace;
    auto all_done = [&] {
      return std::all_of(slot.end_done.begin(), slot.end_done.end(), [](std::uint8_t d) { return d; });
    };
    while (thread_running_ && !all_done()) {
      if (done_.wait_until(lock, give_up) == std::cv_status::timeout) break;
    }
  }
  finish_unresolved_locked(slot, result);
  result.ticks = difference(ticks_, slot.ticks_at_start);
  for (std::size_t s = 0; s < tracks_.size(); ++s) {
    SensorWindowResult& r = result.sensors[s];
    r.start = slot.start[s];
    r.end = slot.end[s];
    if (slot.has_peak[s]) r.peak_w = slot.peak[s];
    r.update_period_s = update_period_locked(s);
    r.update_period_is_upper_bound =
        r.update_period_s.has_value() && !tracks_[s].unchanged_seen && !sensors_[s]->info().self_timed;
  }
  slot.open = false;
  ++slot.generation;
  return result;
}

SamplerStats Sampler::stats() const {
  std::lock_guard lock(mutex_);
  SamplerStats stats;
  stats.running = thread_running_;
  stats.period_s = seconds(period_ns_);
  stats.ticks_taken = ticks_.taken;
  stats.ticks_missed = ticks_.missed;
  stats.ticks_expected = ticks_.taken + ticks_.missed;
  stats.ticks_late = ticks_.late;
  stats.forced_samples = ticks_.forced;
  stats.trace_dropped = trace_dropped_;
  stats.start_ns = start_ns_;
  stats.stop_ns = thread_running_ ? 0 : stop_ns_;
  return stats;
}

std::vector<Sampler::TrackStats> Sampler::track_stats() const {
  std::lock_guard lock(mutex_);
  std::vector<TrackStats> out(tracks_.size());
  for (std::size_t s = 0; s < tracks_.size(); ++s) {
    const Track& track = tracks_[s];
    TrackStats& st = out[s];
    st.samples = track.last.samples;
    st.errors = track.last.errors;
    st.wraps = track.last.wraps;
    st.resets = track.last.resets;
    st.has_error = track.has_error;
    st.first_error_code = track.first_error_code;
    st.update_period_s = update_period_locked(s);
    st.update_period_is_upper_bound =
        st.update_period_s.has_value() && !track.unchanged_seen && !sensors_[s]->info().self_timed;
    if (track.started && track.last.has_power) st.last_power_w = track.last.power_w;
  }
  return out;
}

std::size_t Sampler::drain_trace(const std::function<void(const TraceSample&)>& sink) {
  std::vector<TraceRecord> records;
  {
    std::lock_guard lock(mutex_);
    records.reserve(trace_count_);
    for (std::size_t i = 0; i < trace_count_; ++i) {
      records.push_back(trace_[(trace_head_ + i) % trace_.size()]);
    }
    trace_head_ = trace_.empty() ? 0 : (trace_head_ + trace_count_) % trace_.size();
    trace_count_ = 0;
  }
  for (const TraceRecord& r : records) {
    TraceSample sample;
    sample.time_ns = r.time_ns;
    sample.sensor = r.sensor;
    if (r.has_energy) sample.energy_j = r.energy_j;
    if (r.has_power) sample.power_w = r.power_w;
    sink(sample);
  }
  return records.size();
}

}  // namespace qjoule::energy

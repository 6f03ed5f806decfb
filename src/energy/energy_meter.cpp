#include "qjoule/energy/energy_meter.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "energy/cpu_utilisation.h"
#include "energy/nanoseconds.h"
#include "energy/sampler.h"
#include "qjoule/error.h"

namespace qjoule::energy {

namespace {

std::string join_absences(const std::vector<SensorAbsence>& absent) {
  std::string text;
  for (const SensorAbsence& a : absent) {
    if (!text.empty()) text += "; ";
    text += a.source + ": " + a.reason;
  }
  return text;
}

struct BuildInputs {
  std::string name;
  const WindowResult* result = nullptr;
  std::vector<const Sensor*> sensors;
  const std::vector<SensorAbsence>* absent = nullptr;
  const MeterOptions* options = nullptr;
  const IdleBaseline* idle = nullptr;
  std::vector<std::string> synchronized_with;
  std::optional<CpuTimes> cpu_before;
  std::optional<CpuTimes> cpu_after;
  double derived_interval_s = 0.01;
  std::vector<std::string> first_errors;                           // per sensor, "" when it never failed
  std::vector<std::optional<DeviceState>> state_start, state_end;  // per sensor
};

SensorEnergy sensor_energy(const Sensor& sensor, const SensorWindowResult& r, double duration_s,
                           const std::string& first_error, const BuildInputs& in) {
  const SensorInfo& info = sensor.info();
  SensorEnergy e;
  e.sensor_id = info.id;
  e.description = info.description;
  e.scope = info.scope;
  e.counts_in_total = info.counts_in_total;
  e.nested_in = info.nested_in;
  e.samples = r.end.samples - r.start.samples;
  e.counter_wraps = r.end.wraps - r.start.wraps;
  e.read_errors = r.end.errors - r.start.errors;
  const double covered = r.end.covered_s - r.start.covered_s;
  e.coverage = duration_s > 0 ? std::clamp(covered / duration_s, 0.0, 1.0) : 0.0;
  const bool nothing_seen = e.samples == 0 && covered <= 0.0;

  const std::string no_reading = "no reading of this sensor covered the window";
  if (!info.has_counter) {
    e.counter_unavailable = "this sensor has no energy counter (power readings only)";
    for (const std::string& note : info.notes) {
      if (note.rfind("no energy counter", 0) == 0) e.counter_unavailable = note;
    }
  } else if (nothing_seen) {
    e.counter_unavailable = no_reading;
  } else {
    // A counter that stays exactly still over many of its update periods is not counting: some
    // virtual machines expose a RAPL PMU whose counter never moves. Its energy is unavailable,
    // never 0 J.
    const double delta = r.end.counter_j - r.start.counter_j;
    const double period = info.nominal_update_period_s > 0 ? info.nominal_update_period_s
                                                           : static_cast<double>(in.options->period.count()) / kNsPerS;
    if (delta == 0.0 && e.samples >= 2 && duration_s >= std::max(0.05, kMinUpdatePeriodsPerWindow * period)) {
      // No numbers in the words: the same cause reads the same in every window (reports group by it).
      e.counter_unavailable =
          "the counter never advanced during the window: the sensor is not counting (a virtual machine may expose "
          "it without counting)";
    } else {
      e.counter_energy_j = delta;
    }
  }
  if (!info.has_power) {
    e.integrated_unavailable = "this sensor reports no power readings (the counter is its only source)";
  } else if (nothing_seen) {
    e.integrated_unavailable = no_reading;
  } else {
    e.integrated_energy_j = r.end.integral_j - r.start.integral_j;
  }
  if (e.counter_energy_j && e.integrated_energy_j && *e.counter_energy_j > 0) {
    e.relative_difference = (*e.integrated_energy_j - *e.counter_energy_j) / *e.counter_energy_j;
  }
  if (e.counter_energy_j) {
    e.energy_j = e.counter_energy_j;
    e.energy_source = "counter";
  } else if (e.integrated_energy_j) {
    e.energy_j = e.integrated_energy_j;
    e.energy_source = "power integral";
  } else {
    e.energy_unavailable = info.has_counter ? e.counter_unavailable : e.integrated_unavailable;
  }
  if (e.energy_j && duration_s > 0) e.mean_power_w = *e.energy_j / duration_s;

  if (r.peak_w && (info.has_power || e.counter_energy_j)) {
    e.peak_power_w = r.peak_w;
    e.peak_power_method = info.has_power
                              ? "largest power reading"
                              : fmt::format("largest counter delta over >= {:g} ms", in.derived_interval_s * 1e3);
  } else if (!info.has_power && info.has_counter && !e.counter_energy_j) {
    e.peak_unavailable = "the counter gave no energy in this window: " + e.counter_unavailable;
  } else {
    e.peak_unavailable = info.has_power ? "no power reading inside the window"
                                        : fmt::format("no complete {:g} ms counter interval inside the window",
                                                      in.derived_interval_s * 1e3);
  }

  // The update period the short-window test uses.
  const double nominal = info.nominal_update_period_s;
  if (r.update_period_s && !r.update_period_is_upper_bound) {
    e.update_period_s = r.update_period_s;
  } else if (r.update_period_s) {
    e.update_period_s = nominal > 0 ? std::min(nominal, *r.update_period_s) : *r.update_period_s;
  } else if (nominal > 0) {
    e.update_period_s = nominal;
  } else if (!info.self_timed) {
    e.update_period_s = static_cast<double>(in.options->period.count()) / kNsPerS;
    e.notes.push_back("update period not yet observed: taken to be the sampling period");
  }

  e.validity.short_window =
      e.update_period_s.has_value() && duration_s < kMinUpdatePeriodsPerWindow * *e.update_period_s;
  e.validity.low_coverage = e.coverage < kMinCoverage;
  e.validity.counter_wrapped = e.counter_wraps > 0;
  e.validity.counter_reset = r.end.resets > r.start.resets;
  e.validity.read_errors = e.read_errors > 0;
  e.validity.end_extrapolated = r.end_extrapolated;
  e.validity.from_counter = e.energy_source == "counter";

  // Idle baseline.
  if (in.idle == nullptr) {
    e.net_unavailable = "no idle baseline was measured (--idle S)";
  } else {
    const auto entry = std::find_if(in.idle->sensors.begin(), in.idle->sensors.end(),
                                    [&](const IdleBaseline::Entry& x) { return x.sensor_id == info.id; });
    if (entry == in.idle->sensors.end()) {
      e.net_unavailable = "the idle baseline has no entry for this sensor";
    } else if (!entry->power_w) {
      e.net_unavailable = "the idle baseline has no power for this sensor: " + entry->unavailable;
    } else {
      e.idle_power_w = entry->power_w;
      if (e.energy_j) {
        e.net_energy_j = *e.energy_j - *entry->power_w * duration_s;
      } else {
        e.net_unavailable = "no gross energy to subtract the idle power from";
      }
    }
  }
  if (e.read_errors > 0 && !first_error.empty()) {
    e.notes.push_back(fmt::format("{} failed read{} in the window (first failure since start: {})", e.read_errors,
                                  e.read_errors == 1 ? "" : "s", first_error));
  }
  e.notes.insert(e.notes.end(), info.notes.begin(), info.notes.end());
  for (std::string& problem : sensor.problems()) e.notes.push_back(std::move(problem));
  return e;
}

Measurement build_measurement(const BuildInputs& in) {
  const WindowResult& r = *in.result;
  Measurement m;
  m.name = in.name;
  m.start_ns = r.start_ns;
  m.end_ns = r.end_ns;
  m.duration_s = static_cast<double>(r.end_ns - r.start_ns) / kNsPerS;
  m.synchronized_with = in.synchronized_with;
  m.unavailable = *in.absent;
  m.idle_subtracted = in.idle != nullptr;

  if (!in.sensors.empty()) {
    SamplerWindowStats stats;
    stats.period_s = static_cast<double>(in.options->period.count()) / kNsPerS;
    stats.ticks_taken = r.ticks.taken;
    stats.ticks_missed = r.ticks.missed;
    stats.ticks_expected = r.ticks.taken + r.ticks.missed;
    stats.ticks_late = r.ticks.late;
    stats.forced_samples = r.ticks.forced;
    m.sampler = stats;
  }
  for (std::size_t s = 0; s < in.sensors.size(); ++s) {
    m.sensors.push_back(sensor_energy(*in.sensors[s], r.sensors[s], m.duration_s,
                                      s < in.first_errors.size() ? in.first_errors[s] : std::string(), in));
    if (s < in.state_start.size()) m.sensors.back().state_start = in.state_start[s];
    if (s < in.state_end.size()) m.sensors.back().state_end = in.state_end[s];
  }

  // Total over the sensors that count (no nested domain, no whole-system meter).
  double sum = 0.0, net_sum = 0.0;
  bool all_net = true, all_valid = true;
  for (const SensorEnergy& e : m.sensors) {
    if (!e.counts_in_total || !e.energy_j) continue;
    sum += *e.energy_j;
    m.total.sensor_ids.push_back(e.sensor_id);
    all_valid = all_valid && e.validity.valid();
    if (e.net_energy_j) {
      net_sum += *e.net_energy_j;
    } else {
      all_net = false;
    }
  }
  if (!m.total.sensor_ids.empty()) {
    m.total.energy_j = sum;
    if (all_net) m.total.net_energy_j = net_sum;
    m.total.valid = all_valid;
  } else if (m.sensors.empty()) {
    m.total.unavailable = "no energy sensor: " + join_absences(*in.absent);
  } else {
    m.total.unavailable =
        "no sensor that counts in the total had a value (nested domains and whole-system meters are "
        "not added)";
  }

  if (in.options->estimate) {
    const double tdp = in.options->estimate->tdp_w;
    std::optional<double> utilisation;
    if (in.cpu_before && in.cpu_after) utilisation = cpu_utilisation(*in.cpu_before, *in.cpu_after);
    if (utilisation) {
      EnergyEstimate estimate;
      estimate.tdp_w = tdp;
      estimate.cpu_utilisation = *utilisation;
      estimate.energy_j = tdp * *utilisation * m.duration_s;
      estimate.method = fmt::format("cpu-tdp: {:g} W x {:.1f}% CPU utilisation (all CPUs, /proc/stat) x {:.3f} s", tdp,
                                    *utilisation * 100.0, m.duration_s);
      m.estimate = estimate;
    } else {
      m.estimate_unavailable = in.cpu_before && in.cpu_after
                                   ? "no CPU time passed in /proc/stat during the window (shorter than its 10 ms tick)"
                                   : "/proc/stat is unreadable, so CPU utilisation is unknown";
    }
  }
  return m;
}

}  // namespace

// ---- Window ----

Window::Window(Window&& other) noexcept { *this = std::move(other); }

Window& Window::operator=(Window&& other) noexcept {
  if (this == &other) return *this;
  if (meter_ != nullptr) meter_->cancel_window(*this);
  meter_ = std::exchange(other.meter_, nullptr);
  name_ = std::move(other.name_);
  slot_ = other.slot_;
  generation_ = other.generation_;
  start_ns_ = other.start_ns_;
  cpu_busy_ = other.cpu_busy_;
  cpu_total_ = other.cpu_total_;
  cpu_ok_ = other.cpu_ok_;
  states_ = std::move(other.states_);
  return *this;
}

Window::~Window() {
  if (meter_ != nullptr) meter_->cancel_window(*this);
}

// ---- EnergyMeter ----

EnergyMeter::EnergyMeter(SensorDiscovery found, MeterOptions options)
    : owned_(std::move(found.sensors)), absent_(std::move(found.absent)), options_(options) {
  if (options_.period <= std::chrono::nanoseconds(0)) {
    fail("energy meter: the sampling period must be positive, got {} ns", options_.period.count());
  }
  std::vector<Sensor*> sensors;
  for (auto& sensor : owned_) sensors.push_back(sensor.get());
  sampler_ = std::make_unique<Sampler>(std::move(sensors), SamplerOptions{options_.period, options_.trace_capacity});
}

EnergyMeter::~EnergyMeter() { stop(); }

void EnergyMeter::start() { sampler_->start(); }
void EnergyMeter::stop() { sampler_->stop(); }

std::vector<const SensorInfo*> EnergyMeter::sensors() const {
  std::vector<const SensorInfo*> out;
  for (const auto& sensor : owned_) out.push_back(&sensor->info());
  return out;
}

void EnergyMeter::add_synchronize_hook(std::string label, std::function<void()> hook) {
  if (!hook) fail("energy meter: synchronize hook `{}` is empty", label);
  hooks_.emplace_back(std::move(label), std::move(hook));
}

std::size_t EnergyMeter::remove_synchronize_hook(const std::string& label) {
  return std::erase_if(hooks_, [&label](const auto& hook) { return hook.first == label; });
}

void EnergyMeter::run_synchronize_hooks() {
  for (auto& [label, hook] : hooks_) hook();
}

std::vector<std::string> EnergyMeter::hook_labels() const {
  std::vector<std::string> labels;
  for (const auto& [label, hook] : hooks_) labels.push_back(label);
  return labels;
}

Window EnergyMeter::begin_window(std::string name) {
  Window window;
  window.name_ = std::move(name);
  if (options_.estimate) {
    if (const auto times = read_cpu_times()) {
      window.cpu_busy_ = times->busy;
      window.cpu_total_ = times->total;
      window.cpu_ok_ = true;
    }
  }
  run_synchronize_hooks();  // queued device work belongs before the window
  for (const auto& sensor : owned_) window.states_.push_back(sensor->device_state());
  const Sampler::Ticket ticket = sampler_->open_window();
  window.meter_ = this;
  window.slot_ = ticket.slot;
  window.generation_ = ticket.generation;
  window.start_ns_ = ticket.start_ns;
  return window;
}

Measurement EnergyMeter::end_window(Window& window) {
  if (window.meter_ != this) {
    fail("energy meter: end_window(`{}`): the window is not open on this meter", window.name_);
  }
  run_synchronize_hooks();  // the window's device work must be finished before its end time
  const Sampler::Ticket ticket{window.slot_, window.generation_, window.start_ns_};
  window.meter_ = nullptr;
  const WindowResult result = sampler_->close_window(ticket, options_.meter_grace);

  BuildInputs in;
  in.name = window.name_;
  in.result = &result;
  for (const auto& sensor : owned_) in.sensors.push_back(sensor.get());
  in.absent = &absent_;
  in.options = &options_;
  in.idle = idle_ ? &*idle_ : nullptr;
  in.synchronized_with = hook_labels();
  in.derived_interval_s = std::max(static_cast<double>(options_.period.count()) / kNsPerS, 0.010);
  in.state_start = std::move(window.states_);
  for (const auto& sensor : owned_) in.state_end.push_back(sensor->device_state());
  const std::vector<Sampler::TrackStats> tracks = sampler_->track_stats();
  for (std::size_t s = 0; s < owned_.size(); ++s) {
    in.first_errors.push_back(tracks[s].has_error ? owned_[s]->describe_error(tracks[s].first_error_code)
                                                  : std::string());
  }
  if (options_.estimate) {
    if (window.cpu_ok_) in.cpu_before = CpuTimes{window.cpu_busy_, window.cpu_total_};
    in.cpu_after = read_cpu_times();
  }
  return build_measurement(in);
}

void EnergyMeter::cancel_window(Window& window) {
  if (window.meter_ != this) return;
  sampler_->cancel_window(Sampler::Ticket{window.slot_, window.generation_, window.start_ns_});
  window.meter_ = nullptr;
}

const IdleBaseline& EnergyMeter::measure_idle(std::chrono::nanoseconds duration) {
  std::optional<IdleBaseline> previous = std::move(idle_);
  idle_.reset();  // the idle window itself is gross only
  IdleBaseline baseline;
  try {
    Window window = begin_window("idle");
    std::this_thread::sleep_for(duration);
    baseline.window = end_window(window);
  } catch (...) {
    idle_ = std::move(previous);
    throw;
  }
  baseline.duration_s = baseline.window.duration_s;
  for (const SensorEnergy& e : baseline.window.sensors) {
    IdleBaseline::Entry entry;
    entry.sensor_id = e.sensor_id;
    if (e.energy_j && baseline.duration_s > 0) {
      entry.power_w = *e.energy_j / baseline.duration_s;
    } else {
      entry.unavailable = baseline.duration_s > 0 ? "no energy in the idle window" : "the idle window has no duration";
    }
    baseline.sensors.push_back(std::move(entry));
  }
  idle_ = std::move(baseline);
  return *idle_;
}

void EnergyMeter::set_idle_baseline(IdleBaseline baseline) { idle_ = std::move(baseline); }

SamplerStats EnergyMeter::sampler_stats() const { return sampler_->stats(); }

std::vector<SensorStats> EnergyMeter::sensor_stats() const {
  const std::vector<Sampler::TrackStats> tracks = sampler_->track_stats();
  std::vector<SensorStats> out;
  for (std::size_t s = 0; s < owned_.size(); ++s) {
    const Sampler::TrackStats& t = tracks[s];
    SensorStats stats;
    stats.sensor_id = owned_[s]->info().id;
    stats.samples = t.samples;
    stats.read_errors = t.errors;
    if (t.has_error) stats.first_error = owned_[s]->describe_error(t.first_error_code);
    stats.counter_wraps = t.wraps;
    stats.counter_resets = t.resets;
    stats.observed_update_period_s = t.update_period_s;
    stats.update_period_is_upper_bound = t.update_period_is_upper_bound;
    stats.last_power_w = t.last_power_w;
    out.push_back(std::move(stats));
  }
  return out;
}

std::size_t EnergyMeter::drain_trace(const std::function<void(const TraceSample&)>& sink) {
  return sampler_->drain_trace(sink);
}

}  // namespace qjoule::energy

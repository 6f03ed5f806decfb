// BenchRunner's part that does not depend on the kind of model: the public class, the machine's limits,
// energy of the run's device, timing repetitions, peak memory and kernel lines, and run(), which turns
// a failure into a `failed` record. The per-kind runs: bench_runner_encoder.cpp, bench_runner_decoder.cpp.
#include "qjoule/bench/bench_runner.h"

#include "bench/bench_runner_impl.h"

namespace qjoule::bench {

BenchRunner::BenchRunner(BenchOptions options, energy::EnergyMeter& meter)
    : impl_(std::make_unique<Impl>(std::move(options), meter)) {}
BenchRunner::~BenchRunner() = default;

RunRecord BenchRunner::run(const RunConfig& config) { return impl_->run(config); }

const limits::CachedLimits& BenchRunner::Impl::limits_for(int threads) {
  auto it = machine_limits.find(threads);
  if (it != machine_limits.end()) return it->second;
  it = machine_limits.emplace(threads, limits::machine_limits(threads)).first;
  // On a line of its own: the console reporter's "[k/n] run ..." is waiting for its result.
  if (!it->second.from_cache)
    fmt::print(stderr, "\nmachine limits with {} thread{}: {}", threads, threads == 1 ? "" : "s", it->second.note);
  return it->second;
}

const limits::CachedLimits& BenchRunner::Impl::gpu_limits_for(int gpu_index) {
  auto it = gpu_limits.find(gpu_index);
  if (it == gpu_limits.end()) {
    it = gpu_limits.emplace(gpu_index, limits::gpu_machine_limits(gpu_index)).first;
    if (!it->second.from_cache) fmt::print(stderr, "\nmachine limits of GPU {}: {}", gpu_index, it->second.note);
  }
  return it->second;
}

void BenchRunner::Impl::prefetch_limits(const RunConfig& c) {
  try {
    if (kernels::is_cuda_device(c.device))
      gpu_limits_for(kernels::require_cuda_device(c.device));
    else
      limits_for(static_cast<int>(c.threads));
  } catch (const std::exception&) {
  }
}

const limits::MachineLimits* BenchRunner::Impl::run_limits(RunRecord& r, int gpu_index) {
  try {
    const limits::CachedLimits& l =
        gpu_index >= 0 ? gpu_limits_for(gpu_index) : limits_for(static_cast<int>(r.config.threads));
    record_machine_limits(r, l);
    return &l.limits;
  } catch (const std::exception& e) {
    r.roof_unavailable = std::string("the machine's limits could not be measured: ") + e.what();
    return nullptr;
  }
}

double BenchRunner::Impl::min_seconds() const {
  double slowest = 0.0;
  for (const auto& s : meter.sensor_stats())
    if (s.observed_update_period_s) slowest = std::max(slowest, *s.observed_update_period_s);
  return std::max(options.min_time_s, 10.0 * slowest);
}

energy::EnergyTotal BenchRunner::Impl::gpu_total(const energy::Measurement& m, int gpu_index,
                                                 std::string& reason) const {
  const auto sensor = options.gpu_energy_sensors.find(gpu_index);
  if (sensor == options.gpu_energy_sensors.end()) {
    const auto why = options.gpu_energy_absent.find(gpu_index);
    reason = fmt::format("no NVML sensor was selected for GPU {}{}", gpu_index,
                         why == options.gpu_energy_absent.end() ? std::string() : ": " + why->second);
  } else {
    reason = fmt::format("{} (GPU {}'s board) gave no energy", sensor->second, gpu_index);
    for (const auto& a : m.unavailable)
      if (a.source == sensor->second || a.source == "nvml") reason += fmt::format(": {}: {}", a.source, a.reason);
    for (const auto& e : m.sensors)
      if (e.sensor_id == sensor->second && !e.energy_unavailable.empty()) reason += ": " + e.energy_unavailable;
  }
  return total_over(
      m,
      [&](const energy::SensorEnergy& e) {
        return sensor != options.gpu_energy_sensors.end() && e.sensor_id == sensor->second;
      },
      reason);
}

void BenchRunner::Impl::fill_device_energy(RunRecord& r, const energy::Measurement& m, int gpu_index, double sequences,
                                           double tokens) {
  if (gpu_index < 0) return detail::fill_cpu_record_energy(r, m, sequences, tokens);
  std::string reason;
  const auto total = gpu_total(m, gpu_index, reason);
  fill_energy(r, m, total, false, sequences, tokens);
  for (const std::string& w : energy::clock_limit_warnings(m, total.sensor_ids))
    r.notes.push_back(fmt::format("window `{}`: {}", m.name, w));
  if (r.energy_j) {
    r.energy_method += fmt::format("; GPU {}'s board only, the host's sensors are in energy_window", gpu_index);
  } else if (!total.energy_j) {
    r.energy_unavailable = reason;  // not the CPU's sensors, nor a CPU-utilisation estimate: neither is the GPU's
  }
}

std::vector<double> BenchRunner::Impl::time_self_timed_repetitions(const std::function<std::optional<double>()>& body,
                                                                   double min_s, double& seconds,
                                                                   std::optional<std::size_t> count,
                                                                   std::size_t min_reps) const {
  std::vector<double> samples_ms;
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    const std::optional<double> own_ms = body();
    const auto t1 = Clock::now();
    samples_ms.push_back(own_ms ? *own_ms : std::chrono::duration<double, std::milli>(t1 - t0).count());
    const double elapsed = std::chrono::duration<double>(t1 - start).count();
    if (count ? samples_ms.size() >= *count : (elapsed >= min_s && samples_ms.size() >= min_reps)) {
      seconds = elapsed;
      return samples_ms;
    }
  }
}

BenchRunner::Impl::WindowedRepetitions BenchRunner::Impl::time_in_energy_windows(
    const std::function<std::optional<double>()>& body, double min_s, const std::string& name) {
  const std::size_t windows = std::max<std::size_t>(
      1, options.iters ? std::min(options.decode_energy_windows, *options.iters) : options.decode_energy_windows);
  WindowedRepetitions out;
  for (std::size_t w = 0; w < windows; ++w) {
    energy::Window window = meter.begin_window(fmt::format("{}#{}", name, w + 1));
    double seconds = 0;
    std::optional<std::size_t> count;
    if (options.iters) count = detail::repetitions_of_window(*options.iters, windows, w);
    // The run's min_iters over all its windows: each takes its share, at least one.
    const std::size_t min_reps = std::max<std::size_t>(1, (options.min_iters + windows - 1) / windows);
    const std::vector<double> samples = time_self_timed_repetitions(body, min_s, seconds, count, min_reps);
    out.windows.push_back(meter.end_window(window));
    out.repetitions.push_back(samples.size());
    out.samples_ms.insert(out.samples_ms.end(), samples.begin(), samples.end());
  }
  return out;
}

void BenchRunner::Impl::record_peak_rss(RunRecord& r, bool rss_reset, const MemoryPrediction& predicted) {
  if (rss_reset) {
    r.peak_rss_bytes = peak_rss_bytes();
    if (r.peak_rss_bytes && predicted.unavailable.empty())
      r.notes.push_back(fmt::format("peak memory predicted {} MiB ({}), measured {} MiB ({:+.1f}%)",
                                    predicted.peak_bytes() >> 20, kMemoryPredictionMethod, *r.peak_rss_bytes >> 20,
                                    100.0 * (double(predicted.peak_bytes()) / double(*r.peak_rss_bytes) - 1.0)));
  } else {
    r.notes.push_back("peak RSS unavailable: /proc/self/clear_refs could not reset the high-water mark");
  }
}

void BenchRunner::Impl::record_kernels(RunRecord& r, const std::map<std::string, int>& counts) {
  bool emulated = false;
  for (const auto& [path, n] : counts) {
    r.kernel_paths.push_back(kernel_line(path, n));
    emulated |= path.find("emulated") != std::string::npos;
  }
  if (emulated) {
    r.not_representative = true;
    r.notes.push_back("emulated (fake-quantized) layers: speed and energy are not representative of the format");
  }
}

RunRecord BenchRunner::Impl::run(const RunConfig& c) {
  RunRecord r;
  r.config = c;
  r.run_name = run_name(c);
  r.start_time = iso8601_utc(std::chrono::system_clock::now());
  r.environment = environment;
  r.engine = "qjoule";
  r.warmup_iters = options.warmup;
  prefetch_limits(c);
  try {
    run_measured(c, r);
  } catch (const std::exception& e) {
    // No measured figure of a failed run stands: a fresh record keeps what identifies the run (its
    // configuration, start, environment, the N and M a decoder run was asked for) and its notes.
    RunRecord failed;
    failed.config = r.config;
    failed.run_name = r.run_name;
    failed.start_time = r.start_time;
    failed.environment = r.environment;
    failed.engine = r.engine;
    failed.warmup_iters = r.warmup_iters;
    failed.prefill_tokens = r.prefill_tokens;
    failed.decode_tokens = r.decode_tokens;
    failed.lm_unavailable = "the run failed (see error)";
    failed.roof_unavailable = "the run failed (see error)";
    failed.notes = std::move(r.notes);
    failed.status = "failed";
    failed.error = e.what();
    r = std::move(failed);
  }
  if (options.cooldown_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(options.cooldown_s));
  return r;
}

}  // namespace qjoule::bench

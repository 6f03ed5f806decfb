#include "qjoule/bench/callable_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "bench/peak_rss.h"
#include "bench/record_roofline.h"
#include "bench/window_energy.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/latency_stats.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/error.h"
#include "qjoule/limits/limits_cache.h"

namespace qjoule::bench {
namespace {

using Clock = std::chrono::steady_clock;

void check_fraction(const std::optional<double>& v, const char* what) {
  if (v && !(*v >= 0.0 && *v <= 1.0)) fail("{} {} is outside [0, 1]", what, *v);
}

}  // namespace

int threads_of(const CallableRun& run) {
  return run.threads > 0 ? run.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::optional<int> cuda_index(const std::string& device) {
  if (!device.starts_with("cuda:") || device.size() == 5) return std::nullopt;
  int n = 0;
  for (const char ch : device.substr(5)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + (ch - '0');
    if (n > 1000) return std::nullopt;
  }
  return n;
}

void check_callable_run(const CallableRun& run) {
  if (run.name.empty()) fail("name is empty: each run needs a name (its record's run_name)");
  if (run.name.find_first_of("/\\\n\r\t") != std::string::npos)
    fail("name '{}' holds a path separator or a control character", run.name);
  if (run.precision.empty()) fail("precision is empty: say which format ran (a label, e.g. 'torch-int8-dynamic')");
  if (run.model.empty()) fail("model is empty: a label or a checkpoint folder");
  if (run.batch == 0) fail("batch is 0, expected at least 1 sequence per call");
  if (run.seq == 0) fail("tokens is 0, expected at least 1 token per sequence");
  if (!std::isfinite(run.min_time_s) || run.min_time_s < 0.0)
    fail("min_time {} is not a duration, expected seconds >= 0", run.min_time_s);
  if (run.min_iters == 0) fail("min_iters is 0, expected at least 1 timed call");
  if (run.threads < 0) fail("threads {} is negative", run.threads);
  if (run.device != "cpu" && !cuda_index(run.device))
    fail("device '{}' is not known, expected cpu or cuda:N", run.device);
  check_fraction(run.accuracy, "accuracy");
  if (run.accuracy_correct.has_value() != run.accuracy_labelled.has_value())
    fail("accuracy counts need both correct and labelled");
  if (run.accuracy_labelled && (*run.accuracy_labelled == 0 || *run.accuracy_correct > *run.accuracy_labelled))
    fail("accuracy counts {} correct of {} labelled are not a fraction", *run.accuracy_correct, *run.accuracy_labelled);
  check_fraction(run.fidelity_top1_agreement, "fidelity top1_agreement");
  if (run.fidelity_mean_kl && !(*run.fidelity_mean_kl >= 0.0 && std::isfinite(*run.fidelity_mean_kl)))
    fail("fidelity mean_kl {} is not a divergence (finite, >= 0)", *run.fidelity_mean_kl);
  if (run.fidelity_max_abs_dlogit &&
      !(*run.fidelity_max_abs_dlogit >= 0.0 && std::isfinite(*run.fidelity_max_abs_dlogit)))
    fail("fidelity max_abs_dlogit {} is not finite and >= 0", *run.fidelity_max_abs_dlogit);
}

CallableTiming time_callable(const std::function<void()>& body, const CallableRun& run, energy::EnergyMeter& meter) {
  CallableTiming t;
  t.started = std::chrono::system_clock::now();
  const bool rss_reset = reset_peak_rss();
  for (std::size_t i = 0; i < run.warmup; ++i) body();
  t.warmup = run.warmup;
  double slowest = 0.0;
  for (const auto& s : meter.sensor_stats())
    if (s.observed_update_period_s) slowest = std::max(slowest, *s.observed_update_period_s);
  const double min_s = std::max(run.min_time_s, 10.0 * slowest);
  std::optional<limits::HostCapacityProbe> host;  // CPU runs, outside the energy window
  if (!cuda_index(run.device)) host.emplace(threads_of(run));
  energy::Window window = meter.begin_window(run.name);  // cancelled if `body` throws
  const auto start = Clock::now();
  while (true) {
    const auto t0 = Clock::now();
    body();
    const auto t1 = Clock::now();
    t.samples_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    const double elapsed = std::chrono::duration<double>(t1 - start).count();
    if (elapsed >= min_s && t.samples_ms.size() >= run.min_iters) {
      t.seconds = elapsed;
      break;
    }
  }
  t.window = meter.end_window(window);
  if (host) t.host = host->finish();
  if (rss_reset) t.peak_rss_bytes = peak_rss_bytes();
  return t;
}

RunRecord callable_record_identity(const CallableRun& run, std::chrono::system_clock::time_point started) {
  RunRecord r;
  r.run_name = run.name;
  r.start_time = iso8601_utc(started);
  r.config.model = run.model;
  r.config.device = run.device;
  r.config.precision = run.precision;
  r.config.batch = run.batch;
  r.config.seq = run.seq;
  r.config.threads = threads_of(run);
  if (run.threads == 0)
    r.notes.push_back(
        fmt::format("threads not given by the caller: recorded as this machine's {} cores", r.config.threads));
  r.environment = run_environment();
  r.engine = run.engine;
  r.kernel_paths.push_back("caller: " + (run.kernel_path.empty() ? std::string("not given") : run.kernel_path));
  return r;
}

RunRecord callable_run_record(const CallableRun& run, const CallableTiming& timing) {
  check_callable_run(run);
  RunRecord r = callable_record_identity(run, timing.started);
  r.roof_unavailable = "the caller's function: qjoule does not know the work it did";
  if (timing.host) {
    // Against the cached limits' FP32 peak where there are some (never measured here: seconds a call);
    // without them only other processes' CPU time can say the host was busy.
    const auto cached = limits::cached_machine_limits(timing.host->threads);
    record_host_capacity(r, *timing.host, cached ? *cached : limits::MachineLimits{});
    if (!cached)
      r.notes.push_back(fmt::format(
          "host capacity: no machine limits cached for {} threads (`qjoule limits --threads {}` measures them), so "
          "only other processes' CPU time could say the host was busy",
          timing.host->threads, timing.host->threads));
  }
  r.warmup_iters = timing.warmup;
  r.iters = timing.samples_ms.size();
  r.latency = summarize_latency(timing.samples_ms);
  r.measured_seconds = timing.seconds;
  const double sequences = double(r.iters) * double(run.batch);
  if (timing.seconds > 0) {
    r.sequences_per_s = sequences / timing.seconds;
    r.tokens_per_s = sequences * double(run.seq) / timing.seconds;
  }
  const double tokens = sequences * double(run.seq);
  if (const auto gpu = cuda_index(run.device)) {
    const std::string id = fmt::format("nvml:gpu{}", *gpu);
    const auto total = detail::total_over(
        timing.window, [&](const energy::SensorEnergy& e) { return e.sensor_id == id; },
        fmt::format("no {} sensor in the meter (qjoule.Meter(gpus=[{}]) reads GPU {}'s board)", id, *gpu, *gpu));
    detail::fill_record_energy(r, timing.window, total, false, sequences, tokens);
    if (!total.energy_j) r.energy_unavailable = total.unavailable.empty() ? "no energy for " + id : total.unavailable;
  } else {
    detail::fill_cpu_record_energy(r, timing.window, sequences, tokens);
  }
  r.peak_rss_bytes = timing.peak_rss_bytes;
  if (!timing.peak_rss_bytes)
    r.notes.push_back("peak RSS unavailable: /proc/self/clear_refs could not reset the high-water mark");
  else
    r.notes.push_back(
        "peak_rss_bytes: the whole Python process from the warm-up on (interpreter and libraries included)");
  if (run.model_bytes) r.model_bytes = *run.model_bytes;
  r.notes.push_back("timed by qjoule.bench around a caller's function (Python): kernel path, precision" +
                    std::string(run.model_bytes ? " and model_bytes" : "") + " as the caller gave them" +
                    (run.model_bytes ? "" : "; model_bytes not given (0)"));
  if (run.accuracy_labelled) {
    r.accuracy_correct = run.accuracy_correct;
    r.accuracy_labelled = run.accuracy_labelled;
    r.accuracy = double(*run.accuracy_correct) / double(*run.accuracy_labelled);
  } else {
    r.accuracy = run.accuracy;
  }
  if (r.accuracy) r.notes.push_back("accuracy supplied by the caller, not measured by qjoule");
  r.fidelity_top1_agreement = run.fidelity_top1_agreement;
  r.fidelity_mean_kl = run.fidelity_mean_kl;
  r.fidelity_max_abs_dlogit = run.fidelity_max_abs_dlogit;
  r.fidelity_examples = run.fidelity_examples;
  if (run.fidelity_top1_agreement || run.fidelity_mean_kl || run.fidelity_max_abs_dlogit)
    r.notes.push_back("fidelity supplied by the caller, not measured by qjoule");
  return r;
}

void check_callable_sweep_member(const std::filesystem::path& out_dir, const CallableRun& run) {
  std::error_code ec;
  const bool folder = std::filesystem::is_directory(run.model, ec);
  const std::string identity = folder ? model_identity(run.model) : "label";
  const auto path = out_dir / kSweepIdentityFileName;
  const auto read = read_sweep_identity(out_dir);
  if (!read) {
    nlohmann::json id = {{"models", {{run.model, identity}}}, {"dataset", run.dataset}};
    io::write_file_atomically(path, id.dump(2) + "\n");
    return;
  }
  const nlohmann::json& stored = *read;
  const std::string dataset = stored.value("dataset", std::string());
  if (dataset != run.dataset)
    fail("{}: this sweep scored dataset '{}', this run '{}'; give the same dataset=, or choose another out",
         path.string(), dataset, run.dataset);
  const auto& models = stored["models"];
  if (!models.contains(run.model))
    fail("{}: this sweep measured model(s) {}, this run '{}'; give one of them as model=, or choose another out",
         path.string(), models.dump(), run.model);
  if (models[run.model] != identity)
    fail("{}: model '{}' has changed since this sweep measured it (identity {} then, {} now); choose another out",
         path.string(), run.model, models[run.model].dump(), identity);
}

}  // namespace qjoule::bench

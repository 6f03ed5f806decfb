// qjoule._native: the C++ library as Python sees it (pybind11). Thin by design: the energy meter's
// windows, the callable bench (timing, record, results store), sensor discovery; the Python-side API
// (context managers, dicts, pandas) is python/qjoule/__init__.py. Structured results cross as JSON text,
// the same to_json the CLI writes, so Python reads exactly what the records hold.
//
// The GIL: the sampler thread is C++ and never takes it; every call that waits (starting the meter, an
// idle baseline, ending a window, which waits for one last sample) releases it, and a bench's timed loop
// holds it only while the Python function runs. Errors are qjoule.Error with the CLI's one line.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/results_csv.h"
#include "qjoule/bench/callable_bench.h"
#include "qjoule/bench/decoder_callable_bench.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/run_record.h"
#include "qjoule/bench/sweep_loop.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/measurement.h"
#include "qjoule/error.h"
#include "qjoule/report/html_report.h"
#include "qjoule/report/tolerant_reader.h"

namespace py = pybind11;

namespace {

using qjoule::fail;
using qjoule::energy::EnergyMeter;

std::string sensors_json(const qjoule::energy::SensorDiscovery& found) {
  nlohmann::json out = {{"found", nlohmann::json::array()}, {"absent", nlohmann::json::array()}};
  for (const auto& s : found.sensors) out["found"].push_back(qjoule::energy::to_json(s->info()));
  for (const auto& a : found.absent) out["absent"].push_back({{"source", a.source}, {"reason", a.reason}});
  return out.dump();
}

qjoule::energy::DiscoveryOptions discovery_options(const std::vector<unsigned>& gpus, const std::string& power_meter) {
  qjoule::energy::DiscoveryOptions d;
  d.gpus = gpus;
  d.power_meter = power_meter;
  return d;
}

// One meter and its open windows, by handle (a Python object holds a handle, never a C++ Window).
class NativeMeter {
 public:
  NativeMeter(double interval_ms, const std::vector<unsigned>& gpus, double idle_s, const std::string& power_meter) {
    if (!std::isfinite(interval_ms) || interval_ms < 1.0 || interval_ms > 60000.0)
      fail("interval_ms {} is out of range, expected 1 .. 60000 milliseconds", interval_ms);
    if (!std::isfinite(idle_s) || idle_s < 0.0 || idle_s > 3600.0)
      fail("idle_s {} is out of range, expected 0 .. 3600 seconds (0: no idle baseline)", idle_s);
    qjoule::energy::MeterOptions options;
    options.period = std::chrono::nanoseconds(static_cast<std::int64_t>(interval_ms * 1e6));
    auto found = qjoule::energy::discover_sensors(discovery_options(gpus, power_meter));
    found_json_ = sensors_json(found);
    meter_ = std::make_unique<EnergyMeter>(std::move(found), options);
    py::gil_scoped_release release;
    meter_->start();
    if (idle_s > 0) meter_->measure_idle(std::chrono::nanoseconds(static_cast<std::int64_t>(idle_s * 1e9)));
  }

  std::int64_t begin(const std::string& name) {
    if (name.empty()) fail("window name is empty");
    auto window = std::make_unique<qjoule::energy::Window>(live().begin_window(name));
    std::lock_guard<std::mutex> lock(mutex_);
    const std::int64_t handle = ++next_;
    open_.emplace(handle, std::move(window));
    return handle;
  }

  std::string end(std::int64_t handle) {
    std::unique_ptr<qjoule::energy::Window> window = take(handle);
    qjoule::energy::Measurement m;
    {
      py::gil_scoped_release release;
      m = live().end_window(*window);
    }
    return qjoule::energy::to_json(m).dump();
  }

  void cancel(std::int64_t handle) {
    std::unique_ptr<qjoule::energy::Window> window = take(handle);
    live().cancel_window(*window);
  }

  std::string idle_json() const {
    if (!meter_ || !meter_->idle_baseline()) return "null";
    const auto& idle = *meter_->idle_baseline();
    nlohmann::json out = {{"duration_s", idle.duration_s}, {"sensors", nlohmann::json::array()}};
    for (const auto& e : idle.sensors)
      out["sensors"].push_back({{"sensor_id", e.sensor_id},
                                {"power_w", e.power_w ? nlohmann::json(*e.power_w) : nlohmann::json(nullptr)},
                                {"unavailable", e.unavailable}});
    return out.dump();
  }

  const std::string& found_json() const { return found_json_; }

  // Open windows are cancelled, then the sampler thread stops and is joined. Idempotent.
  void close() {
    std::map<std::int64_t, std::unique_ptr<qjoule::energy::Window>> open;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open.swap(open_);
    }
    if (!meter_) return;
    for (auto& [handle, window] : open) meter_->cancel_window(*window);
    py::gil_scoped_release release;
    meter_->stop();
    meter_.reset();
  }

  ~NativeMeter() {
    open_.clear();
    if (meter_) meter_->stop();
  }

  EnergyMeter& live() {
    if (!meter_) fail("the meter is closed");
    return *meter_;
  }

 private:
  std::unique_ptr<qjoule::energy::Window> take(std::int64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = open_.find(handle);
    if (it == open_.end()) fail("window {} is not open on this meter (already ended or cancelled)", handle);
    auto window = std::move(it->second);
    open_.erase(it);
    return window;
  }

  std::unique_ptr<EnergyMeter> meter_;
  std::string found_json_;
  std::mutex mutex_;
  std::map<std::int64_t, std::unique_ptr<qjoule::energy::Window>> open_;
  std::int64_t next_ = 0;
};

qjoule::bench::CallableRun callable_run(const py::dict& a) {
  qjoule::bench::CallableRun r;
  const auto get = [&](const char* key, auto& field) {
    if (a.contains(key) && !a[key].is_none()) field = a[key].cast<std::decay_t<decltype(field)>>();
  };
  const auto get_opt = [&](const char* key, auto& field) {
    if (a.contains(key) && !a[key].is_none()) field = a[key].cast<typename std::decay_t<decltype(field)>::value_type>();
  };
  get("name", r.name);
  get("model", r.model);
  get("dataset", r.dataset);
  get("precision", r.precision);
  get("device", r.device);
  get("batch", r.batch);
  get("seq", r.seq);
  get("threads", r.threads);
  get("warmup", r.warmup);
  get("min_iters", r.min_iters);
  get("min_time_s", r.min_time_s);
  get("kernel_path", r.kernel_path);
  get("engine", r.engine);
  get_opt("model_bytes", r.model_bytes);
  get_opt("accuracy", r.accuracy);
  get_opt("accuracy_correct", r.accuracy_correct);
  get_opt("accuracy_labelled", r.accuracy_labelled);
  get_opt("fidelity_top1_agreement", r.fidelity_top1_agreement);
  get_opt("fidelity_mean_kl", r.fidelity_mean_kl);
  get_opt("fidelity_max_abs_dlogit", r.fidelity_max_abs_dlogit);
  get("fidelity_examples", r.fidelity_examples);
  return r;
}

constexpr double kMaxAccuracyDropPt = 1.0;  // the paper table's flag, `qjoule bench`'s default
constexpr const char* kSyncLabel = "python sync (qjoule.Meter(sync=...))";

// The meter's `sync` (e.g. torch.cuda.synchronize) as a synchronize hook of the meter while a bench runs,
// so the record's energy window names it; removed with the GIL held (the hook holds a Python object).
class SyncHook {
 public:
  SyncHook(EnergyMeter& meter, const py::object& sync) : meter_(meter) {
    if (sync.is_none()) return;
    meter_.add_synchronize_hook(kSyncLabel, [sync] {
      py::gil_scoped_acquire acquire;
      sync();
    });
    added_ = true;
  }
  ~SyncHook() {
    if (added_) meter_.remove_synchronize_hook(kSyncLabel);
  }
  SyncHook(const SyncHook&) = delete;
  SyncHook& operator=(const SyncHook&) = delete;

 private:
  EnergyMeter& meter_;
  bool added_ = false;
};

// The GIL is taken for each call of `fn` only: the loop, the window's edges and its wait run without it.
std::function<void()> with_gil(const py::function& fn) {
  return [&fn] {
    py::gil_scoped_acquire acquire;
    fn();
  };
}

// A record already in the folder under this name (returned as it is, with skipped = true), else none.
std::optional<std::string> recorded(const qjoule::bench::ResultsStore& store, const std::string& name) {
  for (const auto& r : store.records())
    if (r.run_name == name) return qjoule::bench::to_json(r).dump();
  return std::nullopt;
}

// The record appended and fsynced, and the folder's projections as `qjoule bench` leaves them:
// results.csv, summary.md, report.html.
py::tuple append(qjoule::bench::ResultsStore& store, const qjoule::bench::RunRecord& record, const std::string& out) {
  store.append(record);
  qjoule::bench::write_sweep_outputs(store.records(), out, qjoule::report::sweep_html_writer(), kMaxAccuracyDropPt);
  return py::make_tuple(qjoule::bench::to_json(record).dump(), false);
}

// The bench: checks, the folder (store and sweep identity), a name already recorded, the timed loop
// around `fn`, the record appended.
py::tuple bench(const py::function& fn, const py::dict& args, const std::string& out, NativeMeter& meter,
                const py::object& sync) {
  const qjoule::bench::CallableRun run = callable_run(args);
  qjoule::bench::check_callable_run(run);
  auto store = qjoule::bench::ResultsStore::open(out);
  if (auto done = recorded(store, run.name)) return py::make_tuple(*done, true);
  qjoule::bench::check_callable_sweep_member(out, run);
  EnergyMeter& live = meter.live();
  const SyncHook hook(live, sync);
  std::optional<qjoule::bench::CallableTiming> timing;
  {
    py::gil_scoped_release release;
    timing = qjoule::bench::time_callable(with_gil(fn), run, live);
  }
  return append(store, qjoule::bench::callable_run_record(run, *timing), out);
}

qjoule::bench::DecoderCallableRun decoder_run(const py::dict& args) {
  qjoule::bench::DecoderCallableRun d;
  d.run = callable_run(args);
  if (args.contains("decode_tokens")) d.decode_tokens = args["decode_tokens"].cast<std::size_t>();
  if (args.contains("notes")) d.notes = args["notes"].cast<std::vector<std::string>>();
  if (args.contains("quality_json")) d.quality = nlohmann::json::parse(args["quality_json"].cast<std::string>());
  return d;
}

// A decoder in two phases, each in its own energy window (qjoule.bench_decoder).
py::tuple bench_decoder(const py::function& prefill, const py::function& decode, const py::dict& args,
                        const std::string& out, NativeMeter& meter, const py::object& sync) {
  const qjoule::bench::DecoderCallableRun d = decoder_run(args);
  qjoule::bench::check_decoder_callable_run(d);
  auto store = qjoule::bench::ResultsStore::open(out);
  if (auto done = recorded(store, d.run.name)) return py::make_tuple(*done, true);
  qjoule::bench::check_callable_sweep_member(out, d.run);
  EnergyMeter& live = meter.live();
  const SyncHook hook(live, sync);
  std::optional<qjoule::bench::DecoderCallableTiming> timing;
  {
    py::gil_scoped_release release;
    timing = qjoule::bench::time_decoder_callable(with_gil(prefill), with_gil(decode), d, live);
  }
  return append(store, qjoule::bench::decoder_callable_run_record(d, *timing), out);
}

// A run that could not be had, as a failed record (qjoule.record_failed).
py::tuple record_failed(const py::dict& args, const std::string& error, const std::string& out) {
  const qjoule::bench::DecoderCallableRun d = decoder_run(args);
  qjoule::bench::check_callable_run(d.run);  // the name, precision and shape a record needs
  auto store = qjoule::bench::ResultsStore::open(out);
  if (auto done = recorded(store, d.run.name)) return py::make_tuple(*done, true);
  return append(store, qjoule::bench::failed_callable_run_record(d.run, error, d.decode_tokens), out);
}

// {"records": [...], "skipped": ["FILE:LINE: reason", ...]}, the file read as `qjoule report` reads it
// (report::read_results_tolerantly: a torn, foreign, newer or repeated line is skipped with its reason;
// a file whose every line is skipped fails naming the first); with `strict`, the first skipped line
// fails instead. An empty file (a sweep that recorded nothing yet) has no records.
std::string read_results(const std::string& path, bool strict) {
  std::filesystem::path p(path);
  if (std::filesystem::is_directory(p)) p /= qjoule::bench::kResultsFileName;
  if (!std::filesystem::exists(p)) fail("{}: no such results file (results.jsonl, or the folder holding it)", path);
  nlohmann::json records = nlohmann::json::array(), skipped = nlohmann::json::array();
  if (std::filesystem::file_size(p) > 0) {
    const auto read = qjoule::report::read_results_tolerantly({p});
    for (const auto& s : read.skipped) {
      const std::string where = fmt::format("{}:{}: {}", s.file.string(), s.line, s.reason);
      if (strict) fail("{}", where);
      skipped.push_back(where);
    }
    for (const auto& r : read.records) records.push_back(qjoule::bench::to_json(r));
  }
  return nlohmann::json{{"records", records}, {"skipped", skipped}}.dump();
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "qjoule's C++ library (energy meter, callable bench, results store); use the qjoule package";
  static py::exception<qjoule::Error> error(m, "Error");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const qjoule::Error& e) {
      error(e.what());
    }
  });
  m.def("sensors_json", [](const std::vector<unsigned>& gpus, const std::string& power_meter) {
    return sensors_json(qjoule::energy::discover_sensors(discovery_options(gpus, power_meter)));
  });
  py::class_<NativeMeter>(m, "NativeMeter")
      .def(py::init<double, const std::vector<unsigned>&, double, const std::string&>())
      .def("begin", &NativeMeter::begin)
      .def("end", &NativeMeter::end)
      .def("cancel", &NativeMeter::cancel)
      .def("close", &NativeMeter::close)
      .def("idle_json", &NativeMeter::idle_json)
      .def("found_json", &NativeMeter::found_json);
  m.def("bench", &bench);
  m.def("bench_decoder", &bench_decoder);
  m.def("record_failed", &record_failed);
  m.def("read_results", &read_results, py::arg("path"), py::arg("strict"));
  m.def("record_schema_version", [] { return qjoule::bench::kRunRecordSchemaVersion; });
  // The figures of each task that results.csv (and to_pandas) gives a column.
  m.def("task_figures", [] {
    return std::vector<std::string>(std::begin(qjoule::bench::kResultsCsvTaskFigures),
                                    std::end(qjoule::bench::kResultsCsvTaskFigures));
  });
}

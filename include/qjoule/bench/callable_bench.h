// A caller's own function timed the way `qjoule bench` times a configuration, and recorded in the same
// flat record and results store: the Python package's `qjoule.bench(fn, ...)` (python/qjoule) runs any
// PyTorch model through this, so its rows sit beside `qjoule bench`'s in one results folder and one
// report.
//
//   CallableRun run;  run.name = "torch-fp32";  run.precision = "fp32";  run.batch = 8;  run.seq = 128;
//   check_callable_run(run);                       // one line naming the bad argument
//   CallableTiming t = time_callable(fn, run, meter);   // warm-up, then the energy window around the loop
//   RunRecord r = callable_run_record(run, t);
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_record.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/limits/host_capacity.h"

namespace qjoule::bench {

struct CallableRun {
  std::string name;                // the record's run_name: a second record of it in a folder is skipped
  std::string model = "callable";  // a label, or a checkpoint folder (then its identity joins the sweep's)
  std::string dataset;             // the dataset the caller's accuracy comes from ("" = none)
  std::string precision;           // the caller's label for its format, recorded as given
  std::string device = "cpu";      // "cpu" or "cuda:N": which sensors count in the run's energy
  std::size_t batch = 1, seq = 1;  // sequences per call, tokens per sequence
  int threads = 0;                 // as the caller ran it (0: not given: recorded as the machine's cores, noted)
  std::size_t warmup = 2, min_iters = 3;
  double min_time_s = 2.0;
  std::string kernel_path;  // the caller's description of what ran (recorded as "caller: ...")
  std::string engine;       // the engine that ran ("torchao 0.18.0"); "" = not said (the record's null)
  std::optional<std::uint64_t> model_bytes;
  // The caller's figures, recorded as given and labelled so in the notes.
  std::optional<double> accuracy;                                  // 0..1
  std::optional<std::size_t> accuracy_correct, accuracy_labelled;  // or the counts
  std::optional<double> fidelity_top1_agreement, fidelity_mean_kl, fidelity_max_abs_dlogit;
  std::size_t fidelity_examples = 0;
};

// The run's threads: the caller's, else this machine's cores (the record then says so).
int threads_of(const CallableRun& run);
// N of a device "cuda:N" (digits only, at most 1000), else none ("cpu", or not a device name).
std::optional<int> cuda_index(const std::string& device);

// One line naming the argument and what was expected: an empty or unsafe name, an empty precision,
// batch or seq of 0, a negative or non-finite min_time, an accuracy outside [0, 1], counts without
// both parts, a device other than cpu / cuda:N.
void check_callable_run(const CallableRun& run);

struct CallableTiming {
  std::chrono::system_clock::time_point started;  // before the warm-up: the record's start_time
  std::vector<double> samples_ms;                 // one per timed call
  double seconds = 0;                             // the timed loop's wall time
  energy::Measurement window;                     // around the timed loop only (not the warm-up)
  std::optional<std::uint64_t> peak_rss_bytes;    // the high-water mark from the warm-up's start
  std::size_t warmup = 0;
  std::optional<limits::HostCapacity> host;  // what the host delivered around the loop (CPU runs)
};

// Runs `body` run.warmup times, then in an energy window named run.name until run.min_time_s (and at
// least 10 update periods of the slowest counter) and run.min_iters calls have passed. An exception
// from `body` cancels the window and propagates (nothing is recorded).
CallableTiming time_callable(const std::function<void()>& body, const CallableRun& run, energy::EnergyMeter& meter);

// What every record of a caller's run holds before anything is measured: its name, start, configuration
// (threads as threads_of, with a note where the caller gave none), environment, engine and kernel path.
RunRecord callable_record_identity(const CallableRun& run, std::chrono::system_clock::time_point started);

// The record: environment, latency percentiles, throughput, energy (cpu: the window's total without
// GPU boards; cuda:N: the nvml:gpuN sensor alone), peak RSS, the caller's figures and notes saying whose
// they are.
RunRecord callable_run_record(const CallableRun& run, const CallableTiming& timing);

// The folder's sweep identity admits this run: a folder without one gets {model, dataset}; one with
// one must have scored the same dataset and measured this model (a checkpoint folder: with the same
// identity), else one line saying what differs.
void check_callable_sweep_member(const std::filesystem::path& out_dir, const CallableRun& run);

}  // namespace qjoule::bench

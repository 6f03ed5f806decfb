// Runs one benchmark configuration end to end and returns its flat record: builds the model in the
// configuration's format, times batches (warm-up excluded) inside an energy window, measures peak
// memory, and scores accuracy on a labelled dataset and fidelity to the FP32 run of the same model
// and sequence length. A run that fails (a format that does not fit the model's shapes, say) comes
// back as a record with status "failed" and the error's one line; the sweep goes on.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_config.h"
#include "qjoule/bench/run_record.h"
#include "qjoule/energy/energy_meter.h"

namespace qjoule::bench {

// The model name that stands for the embedded DistilBERT-base-shaped classifier with random weights.
inline constexpr const char* kSyntheticModelName = "distilbert-base";

struct BenchOptions {
  std::string dataset;  // labelled dataset for accuracy ("" = fidelity on synthetic inputs only)
  std::string text_column, label_column;
  std::size_t warmup = 2;             // batches run before timing
  std::optional<std::size_t> iters;   // timed batches; unset = as many as fit min_time_s
  double min_time_s = 2.0;            // at least this long, and at least 10 energy-counter updates
  double cooldown_s = 0.0;            // sleep after each run
  std::size_t fidelity_examples = 32; // synthetic sequences compared with FP32 when there is no dataset
  std::size_t min_iters = 3;          // never fewer timed batches than this (percentiles need samples)
  // Where each run's power trace goes (<trace_dir>/<run name>.csv, see qjoule/energy/trace_csv.h);
  // empty = no traces. The meter must keep a trace (MeterOptions::trace_capacity > 0).
  std::filesystem::path trace_dir;
};

// The precision spec without the options that are not Linear formats ("sqA" for SmoothQuant),
// and the SmoothQuant alpha they asked for (< 0: none). "int8:sq0.5" -> {"int8", 0.5}.
struct PrecisionPlan {
  std::string linear_spec;
  float smoothquant_alpha = -1.0f;
};
PrecisionPlan plan_precision(const std::string& precision);

// Checks every configuration before anything runs: known device and precision (with its options),
// and a sequence length the model has positions for. Fails with one line naming the configuration.
void validate_configs(const std::vector<RunConfig>& configs);

// The machine and build the records come from (CPU model, cores, ISA flags, OS, compiler, qjoule
// version and commit, oneDNN), the same for every run of one invocation.
nlohmann::json run_environment();

class BenchRunner {
 public:
  BenchRunner(BenchOptions options, energy::EnergyMeter& meter);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  RunRecord run(const RunConfig& config);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qjoule::bench

// The sweep as library code: run every configuration that a results store does not hold yet, one
// at a time, append each record as it finishes (fsynced, so a killed sweep loses only the run in
// progress), and tell a reporter what happens. `qjoule bench` on one machine and each Slurm array
// task run this same loop; they differ only in the store (OUT/results.jsonl or a task's shard) and
// in which configurations they are given.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/run_config.h"
#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// What a sweep tells the people watching it; every method has a do-nothing default.
class SweepReporter {
 public:
  virtual ~SweepReporter() = default;
  // Before the first run: `total` configurations, `already` of them in the store (skipped).
  virtual void sweep_started(std::size_t /*total*/, std::size_t /*already*/) {}
  // Run `index` (1-based, of `total`) starts.
  virtual void run_started(std::size_t /*index*/, std::size_t /*total*/, const std::string& /*run_name*/) {}
  // Its record was appended; `done` of `to_run` runs are finished, about `eta_s` seconds to go.
  virtual void run_finished(const RunRecord& /*record*/, std::size_t /*done*/, std::size_t /*to_run*/,
                            double /*eta_s*/) {}
  // Appending failed (the error is rethrown after this).
  virtual void run_aborted() {}
};

struct SweepOutcome {
  std::size_t total = 0;    // configurations given
  std::size_t skipped = 0;  // already in the store
  std::size_t ran = 0;      // run now (ok or failed)
  std::size_t failed = 0;   // of those, status "failed"
};

// The configurations of `configs` whose run name `store` does not hold, in order.
[[nodiscard]] std::vector<RunConfig> configs_to_run(const std::vector<RunConfig>& configs, const ResultsStore& store);

// Runs `run` on each configuration the store does not hold and appends its record. A run's own
// failure is its record (status "failed"); only an error of the store itself stops the sweep.
SweepOutcome run_sweep(const std::vector<RunConfig>& configs, ResultsStore& store,
                       const std::function<RunRecord(const RunConfig&)>& run, SweepReporter& reporter);

// Writes the HTML report of `records` to `html` with the sweep's flag thresholds (accuracy drop in
// points, perplexity increase in %). The report module is above this one: the caller hands its writer
// down (report::sweep_html_writer()), so the sweep never includes the report.
using HtmlReportWriter = std::function<void(const std::vector<RunRecord>& records, const std::filesystem::path& html,
                                            double max_accuracy_drop, double max_ppl_increase_pct)>;

// The projections of a sweep's records next to its results.jsonl: results.csv, summary.md and
// report.html (written by `html`; none without one). The report is a view: when it cannot be made
// (no Chart.js), `report_error` says why and the rest still stands. Returns the paper table (markdown)
// for the terminal.
struct SweepOutputs {
  std::vector<std::filesystem::path> written;
  std::string report_error;
  std::string paper_table;
};
SweepOutputs write_sweep_outputs(const std::vector<RunRecord>& records, const std::filesystem::path& out,
                                 const HtmlReportWriter& html, double max_accuracy_drop,
                                 double max_ppl_increase_pct = kDefaultMaxPplIncreasePct);

}  // namespace qjoule::bench

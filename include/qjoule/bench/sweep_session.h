// What `qjoule bench` does with its configurations once they are known and valid, in each of its
// modes; progress and notes go to stderr, the paper table to stdout.
//   run_local_sweep    every configuration OUT/results.jsonl lacks, here, then the outputs
//   submit_slurm_sweep the ones recorded nowhere, as a Slurm array job + merge job (slurm_sweep.h)
//   run_slurm_task     inside array task k: its configurations, into its shard
//   run_slurm_merge    inside the merge job: the shards into OUT/results.jsonl, then the outputs
// Each returns whether everything it was responsible for is recorded with status ok.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/bench/bench_meter.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/run_config.h"
#include "qjoule/bench/sweep_loop.h"

namespace qjoule::bench {

struct SweepSettings {
  BenchOptions runner;             // dataset, warm-up, timing, decode tokens, cooldown (trace_dir: set from OUT)
  BenchMeterOptions meter;         // sensors, sampling, idle baseline
  double max_accuracy_drop = 1.0;  // points, for the paper table's flags
  double max_ppl_increase_pct = kDefaultMaxPplIncreasePct;  // decoder runs with a text: the same, in %
  HtmlReportWriter html_report;  // report.html (report::sweep_html_writer(); none when empty)
};

struct SlurmSettings {
  std::size_t chunk = 1;                    // configurations per array task
  std::vector<std::string> sbatch_options;  // --slurm-opt
  bool dry_run = false;                     // print the scripts, submit nothing
  bool wait = false;                        // block until the merge job ends, then summarize
};

// The folder of a sweep given no --out: qjoule-bench/<UTC time>, e.g. qjoule-bench/20261125-224500.
std::filesystem::path new_sweep_dir();

bool run_local_sweep(const std::vector<RunConfig>& configs, const std::filesystem::path& out,
                     const SweepSettings& settings);
bool submit_slurm_sweep(const std::vector<RunConfig>& configs, const std::filesystem::path& out,
                        const SweepSettings& settings, const SlurmSettings& slurm);
// --status: each run of the sweep submitted from OUT and its state (slurm_sweep_status), then the
// counts per state.
void print_slurm_status(const std::filesystem::path& out);
bool run_slurm_task(const std::vector<RunConfig>& configs, const std::filesystem::path& out,
                    const SweepSettings& settings);
bool run_slurm_merge(const std::vector<RunConfig>& configs, const std::filesystem::path& out,
                     const SweepSettings& settings);

}  // namespace qjoule::bench

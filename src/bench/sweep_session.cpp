#include "qjoule/bench/calibration_cache.h"
#include "qjoule/bench/sweep_session.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include <fmt/format.h>

#include "qjoule/bench/console_reporter.h"
#include "qjoule/bench/lm_quality.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/slurm_sweep.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/bench/sweep_loop.h"
#include "qjoule/error.h"
#include "qjoule/kernels/kernel_overrides.h"

namespace qjoule::bench {
namespace fs = std::filesystem;
namespace {

void note(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// "1 run", "6 runs".
std::string count_of(std::size_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); }

// The meter, the runner and the loop: every configuration of `configs` that `store` lacks.
SweepOutcome run_into(const std::vector<RunConfig>& configs, ResultsStore& store, const fs::path& out,
                      const SweepSettings& settings) {
  BenchOptions options = settings.runner;
  if (settings.meter.trace) options.trace_dir = out / "traces";
  options.results_dir = out;
  const auto meter = make_bench_meter(configs, settings.meter, options, note);
  BenchRunner runner(options, *meter);
  if (configs.front().model == kSyntheticModelName)
    note(
        "model: embedded DistilBERT-base-shaped classifier (6 layers, dim 768, 12 heads, FFN 3072, vocab 30,522) "
        "with random weights and synthetic inputs; accuracy is fidelity to its FP32 run");
  if (std::any_of(configs.begin(), configs.end(), [](const auto& c) { return is_decoder_model(c.model); }))
    note(
        fmt::format("decoder model: each run times the prefill of --seq prompt tokens and {} greedy decode steps "
                    "(--decode-tokens), batch 1, each phase in its own energy window",
                    options.decode_tokens));
  if (const auto forced = kernels::kernel_overrides_in_force(); !forced.empty()) {
    std::string list;
    for (const auto& [variable, value] : forced)
      list += fmt::format("{}{}={}", list.empty() ? "" : ", ", variable, value);
    note(fmt::format("kernel choices forced by the environment (each record names them): {}", list));
  }
  // --decode-tokens is not part of a run name: say so when a resumed sweep recorded another value.
  for (const auto& r : store.records()) {
    if (r.decode_tokens && *r.decode_tokens != options.decode_tokens) {
      note(fmt::format("note: {} holds decoder runs with {} decode tokens (e.g. {}); this bench uses {}",
                       store.results_path().string(), *r.decode_tokens, r.run_name, options.decode_tokens));
      break;
    }
  }
  ConsoleReporter reporter(store.results_path().string());
  return run_sweep(
      configs, store, [&runner](const RunConfig& c) { return runner.run(c); }, reporter);
}

// results.csv, summary.md, report.html, and the paper table on stdout.
void write_outputs(const ResultsStore& store, const fs::path& out, const SweepSettings& settings) {
  const auto outputs = write_sweep_outputs(store.records(), out, settings.html_report, settings.max_accuracy_drop,
                                           settings.max_ppl_increase_pct);
  if (!outputs.report_error.empty()) note("warning: no report.html: " + outputs.report_error);
  fmt::print("{}\n", outputs.paper_table);
  std::string written;
  for (const auto& path : outputs.written) written += ", " + path.string();
  note(fmt::format("wrote {} ({} runs){}", store.results_path().string(), store.records().size(), written));
}

ResultsStore open_sweep_store(const std::vector<RunConfig>& configs, const fs::path& out, const SweepSettings& s) {
  auto store = ResultsStore::open(out);
  const LmQuality lm(s.runner.lm, out, note);
  TaskAccuracy tasks(s.runner.tasks, out, note);
  check_sweep_identity(out, sweep_identity(configs, s.runner.dataset, lm.sweep_identity_entry(), s.runner.lm.reference,
                                           calibration_identity_entry(s.runner.calibration),
                                           tasks.sweep_identity_entry()));  // under the lock
  for (const auto& n : store.notes()) note("note: " + n);
  return store;
}

}  // namespace

fs::path new_sweep_dir() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  return fs::path("qjoule-bench") / stamp;
}

bool run_local_sweep(const std::vector<RunConfig>& configs, const fs::path& out, const SweepSettings& settings) {
  auto store = open_sweep_store(configs, out, settings);
  const auto outcome = run_into(configs, store, out, settings);
  write_outputs(store, out, settings);
  if (outcome.failed > 0)
    note(fmt::format("{} of {} runs failed (recorded with their error)", outcome.failed, outcome.ran));
  return outcome.failed == 0;
}

bool submit_slurm_sweep(const std::vector<RunConfig>& configs, const fs::path& out, const SweepSettings& settings,
                        const SlurmSettings& slurm) {
  std::vector<RunConfig> pending;
  {
    auto store = open_sweep_store(configs, out, settings);  // released before the merge job needs it
    const auto merged = merge_slurm_shards(store, out);     // what earlier tasks left, first
    for (const auto& n : merged.notes) note("note: " + n);
    pending = configs_to_run(configs, store);
  }
  if (pending.empty()) {
    note(fmt::format("slurm: all {} runs are in {}; nothing to submit", configs.size(),
                     (out / kResultsFileName).string()));
  } else {
    int cpus = 1;
    for (const auto& c : pending) cpus = std::max(cpus, c.threads);
    const auto tasks = plan_slurm_tasks(pending, slurm.chunk);
    const auto scripts = slurm_scripts(out, slurm_command_of_this_process(), fs::current_path(), tasks.size(), cpus,
                                       slurm.sbatch_options);
    if (slurm.dry_run) {
      fmt::print("# {} for {}; not submitted (--slurm-dry-run)\n{}\n{}", count_of(tasks.size(), "array task"),
                 count_of(pending.size(), "run"), scripts.array, scripts.merge);
      return true;
    }
    const auto job = submit_slurm_jobs(out, tasks, scripts);
    std::vector<std::string> names;
    for (const auto& c : configs) names.push_back(run_name(c));
    record_slurm_submission(out, names, job, tasks);
    note(fmt::format("slurm: submitted {} as array job {} ({}) and merge job {}; logs in {}",
                     count_of(pending.size(), "run"), job.array_job_id, count_of(tasks.size(), "task"),
                     job.merge_job_id, (out / "slurm").string()));
    if (!slurm.wait) return true;
    wait_for_slurm_jobs({job.array_job_id, job.merge_job_id});
  }
  if (!slurm.wait) return true;
  const auto store = ResultsStore::open(out);
  std::size_t ok = 0, failed = 0;
  for (const auto& r : store.records()) (r.status == "ok" ? ok : failed) += 1;
  const std::size_t missing = configs_to_run(configs, store).size();
  note(fmt::format("slurm: {} done, {} failed, {} missing of {} runs ({})", ok, failed, missing, configs.size(),
                   store.results_path().string()));
  return failed == 0 && missing == 0;
}

void print_slurm_status(const fs::path& out) {
  const auto runs = slurm_sweep_status(out);
  std::size_t width = 8;
  for (const auto& r : runs) width = std::max(width, r.run_name.size());
  fmt::print("{:<{}}  {:<18}  {}\n", "run", width, "state", "array task");
  std::map<std::string, std::size_t> counts;
  for (const auto& r : runs) {
    fmt::print("{:<{}}  {:<18}  {}\n", r.run_name, width, r.state, r.job.empty() ? "-" : r.job);
    ++counts[r.state];
  }
  std::string summary;
  for (const auto& [state, n] : counts) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, state);
  fmt::print("{}: {}\n", count_of(runs.size(), "run"), summary);
}

bool run_slurm_task(const std::vector<RunConfig>& configs, const fs::path& out, const SweepSettings& settings) {
  const std::size_t task = slurm_array_task_id();
  const auto names = slurm_task_run_names(out, task);
  std::vector<RunConfig> mine;
  for (const auto& c : configs)
    if (std::find(names.begin(), names.end(), run_name(c)) != names.end()) mine.push_back(c);
  if (mine.size() != names.size())
    fail("slurm task {}: {} of its {} runs are not in this sweep (was the command changed after submitting?)", task,
         names.size() - mine.size(), names.size());
  auto shard = ResultsStore::open(slurm_shard_dir(out));
  return run_into(mine, shard, out, settings).failed == 0;
}

bool run_slurm_merge(const std::vector<RunConfig>& configs, const fs::path& out, const SweepSettings& settings) {
  auto store = open_sweep_store(configs, out, settings);
  const auto merged = merge_slurm_shards(store, out);
  for (const auto& n : merged.notes) note("note: " + n);
  note(fmt::format("slurm merge: {} new records from {} shards ({} were in already)", merged.added, merged.shards,
                   merged.already));
  write_outputs(store, out, settings);
  return configs_to_run(configs, store).empty();
}

}  // namespace qjoule::bench

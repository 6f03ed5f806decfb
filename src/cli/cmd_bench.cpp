// `qjoule bench`: sweeps of (model × precision × batch × seq × threads), each run timed, measured
// for energy, sized and scored, one record per run appended to OUT/results.jsonl as it finishes;
// then OUT/results.csv, OUT/summary.md and the paper table on the console. A decoder model runs
// batch 1 and times its prefill (--seq prompt tokens) and decode (--decode-tokens) phases apart.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/bench_dry_run.h"
#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "qjoule/bench/bench_meter.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/console_reporter.h"
#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/results_csv.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/slurm_sweep.h"
#include "qjoule/bench/sweep.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/bench/sweep_loop.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/summary.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/report/html_report.h"

namespace qjoule::cli {
namespace {


struct BenchArgs {
  std::string model;
  std::string dataset;
  std::string precisions = quant::default_sweep_precisions();
  std::string batch = "1,8";
  std::string seq = "128";
  std::string threads;  // default: every hardware thread
  std::string device = "cpu";
  std::size_t warmup = 2;
  std::size_t iters = 0;
  std::size_t decode_tokens = bench::kDefaultDecodeTokens;
  double min_time = 2.0;
  double idle = 5.0;
  double cooldown = 0.0;
  std::string sweep;
  std::string out;  // default: qjoule-bench/<UTC time>, a new folder for each sweep
  bool resume = false;
  bool dry_run = false;
  bool trace = false;
  double max_accuracy_drop = 1.0;
  double interval_ms = 10.0;
  std::string power_meter;
  std::string estimate;
  std::string text_column, label_column;
  // Which list options were given on the command line (they may not be mixed with --sweep).
  std::vector<std::string> lists_given;
  bool batch_given = false;
  // Slurm (slurm_sweep.h): submit, and the two kinds of job the submitted scripts run.
  bool slurm = false, slurm_dry_run = false, wait = false;
  std::size_t slurm_chunk = 1;
  std::vector<std::string> slurm_options;
  bool slurm_task = false, slurm_merge = false;
};

bench::SweepSpec sweep_from_args(const BenchArgs& a) {
  bench::SweepSpec spec;
  if (!a.sweep.empty()) {
    if (!a.lists_given.empty())
      fail("--sweep {} and {} both set the runs; give the lists in the sweep file or on the command line, not both",
           a.sweep, a.lists_given.front());
    spec = bench::parse_sweep_file(a.sweep);
    bool sweeps_model = false;
    for (const auto& [key, values] : spec.swept) sweeps_model |= key == "model";
    if (!a.model.empty() && !sweeps_model) spec.defaults.model = a.model;
    return spec;
  }
  spec.defaults.model = a.model.empty() ? bench::kSyntheticModelName : a.model;
  spec.defaults.device = a.device;
  const auto as_text = [](const std::vector<std::size_t>& v) {
    std::vector<std::string> out;
    for (auto x : v) out.push_back(std::to_string(x));
    return out;
  };
  spec.swept.push_back({"precision", bench::parse_string_list("--precisions", a.precisions)});
  // A decoder runs one sequence at a time: without --batch it gets batch 1, not the encoders' 1,8.
  const bool decoder_default = !a.batch_given && bench::is_decoder_model(spec.defaults.model);
  spec.swept.push_back({"batch", as_text(bench::parse_size_list("--batch", decoder_default ? "1" : a.batch))});
  spec.swept.push_back({"seq", as_text(bench::parse_size_list("--seq", a.seq))});
  const std::string threads =
      a.threads.empty() ? std::to_string(std::max(1u, std::thread::hardware_concurrency())) : a.threads;
  spec.swept.push_back({"threads", as_text(bench::parse_size_list("--threads", threads))});
  return spec;
}

// OUT, given or a new qjoule-bench/<UTC time>.
std::filesystem::path out_dir(const BenchArgs& a) {
  if (!a.out.empty()) return a.out;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  return std::filesystem::path("qjoule-bench") / stamp;
}

void print_to_stderr(const std::string& line) { fmt::print(stderr, "{}\n", line); }

// What the runs measure with, and the runs themselves, into `store`.
bench::SweepOutcome run_configs(const BenchArgs& a, const std::vector<bench::RunConfig>& configs,
                                bench::ResultsStore& store, const std::filesystem::path& out) {
  bench::BenchOptions options;
  options.dataset = a.dataset;
  options.text_column = a.text_column;
  options.label_column = a.label_column;
  options.warmup = a.warmup;
  if (a.iters > 0) options.iters = a.iters;
  options.min_time_s = a.min_time;
  options.decode_tokens = a.decode_tokens;
  options.cooldown_s = a.cooldown;
  if (a.trace) options.trace_dir = out / "traces";
  const bench::BenchMeterOptions meter_options{a.interval_ms, a.power_meter, a.estimate, a.trace, a.idle};
  const auto meter = bench::make_bench_meter(configs, meter_options, options, print_to_stderr);
  bench::BenchRunner runner(options, *meter);
  if (configs.front().model == bench::kSyntheticModelName)
    print_to_stderr("model: embedded DistilBERT-base-shaped classifier (6 layers, dim 768, 12 heads, FFN 3072, vocab "
                    "30,522) with random weights and synthetic inputs; accuracy is fidelity to its FP32 run");
  if (std::any_of(configs.begin(), configs.end(), [](const auto& c) { return bench::is_decoder_model(c.model); }))
    print_to_stderr(fmt::format("decoder model: each run times the prefill of --seq prompt tokens and {} greedy "
                                "decode steps (--decode-tokens), batch 1, each phase in its own energy window",
                                a.decode_tokens));
  // --decode-tokens is not part of a run name: say so when a resumed sweep recorded another value.
  for (const auto& r : store.records())
    if (r.decode_tokens && *r.decode_tokens != a.decode_tokens) {
      print_to_stderr(fmt::format("note: {} holds decoder runs with {} decode tokens (e.g. {}); this bench uses {}",
                                  store.results_path().string(), *r.decode_tokens, r.run_name, a.decode_tokens));
      break;
    }
  bench::ConsoleReporter reporter(store.results_path().string());
  return bench::run_sweep(configs, store, [&runner](const bench::RunConfig& c) { return runner.run(c); }, reporter);
}

// results.csv, summary.md, report.html and the paper table on stdout.
void write_outputs(const BenchArgs& a, const bench::ResultsStore& store, const std::filesystem::path& out) {
  const auto outputs = bench::write_sweep_outputs(store.records(), out, a.max_accuracy_drop);
  if (!outputs.report_error.empty()) print_to_stderr("warning: no report.html: " + outputs.report_error);
  fmt::print("{}\n", outputs.paper_table);
  std::string written;
  for (const auto& path : outputs.written) written += ", " + path.string();
  print_to_stderr(fmt::format("wrote {} ({} runs){}", store.results_path().string(), store.records().size(), written));
}

// --slurm: submit the configurations recorded nowhere yet; --wait for the merge and summarize.
void submit_to_slurm(const BenchArgs& a, const std::vector<bench::RunConfig>& configs,
                     const std::filesystem::path& out, CommandContext& ctx) {
  std::vector<bench::RunConfig> pending;
  {
    auto store = bench::ResultsStore::open(out);  // released before the merge job needs it
    bench::check_sweep_identity(out, bench::sweep_identity(configs, a.dataset));
    const auto merged = bench::merge_slurm_shards(store, out);  // what earlier tasks left, first
    for (const auto& note : merged.notes) print_to_stderr("note: " + note);
    pending = bench::configs_to_run(configs, store);
  }
  if (pending.empty()) {
    print_to_stderr(fmt::format("slurm: all {} runs are in {}; nothing to submit", configs.size(),
                                (out / bench::kResultsFileName).string()));
  } else {
    int cpus = 1;
    for (const auto& c : pending) cpus = std::max(cpus, c.threads);
    const auto tasks = bench::plan_slurm_tasks(pending, a.slurm_chunk);
    const auto scripts = bench::slurm_scripts(out, bench::slurm_command_of_this_process(),
                                              std::filesystem::current_path(), tasks.size(), cpus, a.slurm_options);
    if (a.slurm_dry_run) {
      fmt::print("# {} array task{} for {} runs; not submitted (--slurm-dry-run)\n{}\n{}", tasks.size(), tasks.size() == 1 ? "" : "s",
                 pending.size(), scripts.array, scripts.merge);
      return;
    }
    const auto job = bench::submit_slurm_sweep(out, tasks, scripts);
    print_to_stderr(fmt::format("slurm: submitted {} runs as array job {} ({} tasks) and merge job {}; logs in {}",
                                pending.size(), job.array_job_id, tasks.size(), job.merge_job_id,
                                (out / "slurm").string()));
    if (!a.wait) return;
    bench::wait_for_slurm_jobs({job.array_job_id, job.merge_job_id});
  }
  if (!a.wait) return;
  const auto store = bench::ResultsStore::open(out);
  std::size_t ok = 0, failed = 0;
  for (const auto& r : store.records()) (r.status == "ok" ? ok : failed) += 1;
  const std::size_t missing = bench::configs_to_run(configs, store).size();
  print_to_stderr(fmt::format("slurm: {} done, {} failed, {} missing of {} runs ({})", ok, failed, missing,
                              configs.size(), store.results_path().string()));
  if (failed > 0 || missing > 0) ctx.exit_code = 1;
}

void run_bench(const BenchArgs& a, CommandContext& ctx) {
  if (a.min_time <= 0 && a.iters == 0) fail("--min-time {} is not positive, expected seconds > 0", a.min_time);
  const auto configs = bench::expand_sweep(sweep_from_args(a));
  bench::validate_configs(configs, a.decode_tokens);
  std::set<std::string> noted;
  for (const auto& c : configs) {
    if (noted.insert(c.precision).second)
      if (const auto note = quant::old_spelling_note(c.precision); !note.empty()) print_to_stderr("note: " + note);
  }
  int most_threads = 0;
  for (const auto& c : configs) {
    if (c.threads > kMaxThreads)
      fail("run {}: {} threads is out of range, expected 1 to {}", bench::run_name(c), c.threads, kMaxThreads);
    most_threads = std::max(most_threads, c.threads);
  }
  warn_if_more_threads_than_cpus(most_threads, "--threads");
  if (a.dry_run) {
    print_bench_dry_run(configs, a.decode_tokens);
    return;
  }
  const bool slurm_job = a.slurm_task || a.slurm_merge;
  if ((a.resume || a.slurm || slurm_job) && a.out.empty())
    fail("{} needs --out DIR: the folder of the sweep{}", a.slurm ? "--slurm" : a.resume ? "--resume" : "a Slurm job",
         a.slurm ? ", on a file system every node sees" : " to continue");
  const std::filesystem::path out = out_dir(a);
  const auto results = out / bench::kResultsFileName;
  std::error_code ec;
  if (!a.resume && !slurm_job && std::filesystem::exists(results, ec) && std::filesystem::file_size(results, ec) > 0)
    fail("{} already holds results; pass --resume to continue that sweep, or choose another --out", results.string());
  if (a.slurm) return submit_to_slurm(a, configs, out, ctx);

  if (a.slurm_task) {  // one array task: its configurations, into its own shard
    const auto names = bench::slurm_task_run_names(out, bench::slurm_array_task_id());
    std::vector<bench::RunConfig> mine;
    for (const auto& c : configs)
      if (std::find(names.begin(), names.end(), bench::run_name(c)) != names.end()) mine.push_back(c);
    if (mine.size() != names.size())
      fail("slurm task {}: {} of its {} runs are not in this sweep (was the command changed after submitting?)",
           bench::slurm_array_task_id(), names.size() - mine.size(), names.size());
    auto shard = bench::ResultsStore::open(bench::slurm_shard_dir(out));
    if (run_configs(a, mine, shard, out).failed > 0) ctx.exit_code = 1;
    return;
  }

  auto store = bench::ResultsStore::open(out);
  bench::check_sweep_identity(out, bench::sweep_identity(configs, a.dataset));  // under the store's lock
  for (const auto& note : store.notes()) print_to_stderr("note: " + note);
  if (a.slurm_merge) {
    const auto merged = bench::merge_slurm_shards(store, out);
    for (const auto& note : merged.notes) print_to_stderr("note: " + note);
    print_to_stderr(fmt::format("slurm merge: {} new records from {} shards ({} were in already)", merged.added,
                                merged.shards, merged.already));
    write_outputs(a, store, out);
    if (!bench::configs_to_run(configs, store).empty()) ctx.exit_code = 1;
    return;
  }
  const auto outcome = run_configs(a, configs, store, out);
  write_outputs(a, store, out);
  if (outcome.failed > 0) {
    print_to_stderr(fmt::format("{} of {} runs failed (recorded with their error)", outcome.failed, outcome.ran));
    ctx.exit_code = 1;
  }
}

}  // namespace

void add_bench_command(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "bench", "Sweep precisions, batch sizes, sequence lengths and threads; measure latency, throughput, energy, "
               "size and accuracy per run.");
  cmd->footer(
      "Each finished run is appended to OUT/results.jsonl at once (fsync), so a killed sweep loses only the run\n"
      "in progress; --resume skips what is recorded. OUT/results.csv, OUT/summary.md (the paper table, with\n"
      "speed-up, energy and accuracy deltas against FP32 of the same shape) and OUT/report.html (the table and\n"
      "the plots, one self-contained page) are written at the end.\n"
      "Without --model, an embedded DistilBERT-base-shaped model with random weights is used (fidelity only).\n"
      "A decoder model (Llama, Qwen2 or GPT-2 folder) runs batch 1: each run times the prefill of --seq prompt\n"
      "tokens and, in a second energy window, --decode-tokens greedy decode steps; the record has prefill and\n"
      "decode tokens/s (mean ± sd over repetitions) and mJ/token of each phase (docs/bench-records.md).\n"
      "Sweep file: {\"defaults\": {\"seq\": 128}, \"sweep\": {\"precision\": [\"fp32\", \"int8\"], \"batch\": [1, 8]},\n"
      "             \"mode\": \"cross_product\"}   (or \"one_at_a_time\")\n"
      "Examples:\n"
      "  qjoule bench                                   # the default sweep, a few minutes on 2 cores\n"
      "  qjoule bench --model ../shared/data/models/sst2-distilbert-mini \\\n"
      "               --dataset ../shared/data/sst2/dev.tsv --precisions fp32,int8,nf4 --batch 8\n"
      "  qjoule bench --model tests/fixtures/decoders/tiny-llama --precisions fp32,int8 --seq 64 --decode-tokens 32\n"
      "  qjoule bench --sweep sweep.json --out results/ --resume");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--model", a->model, "Model folder (default: the embedded DistilBERT-base-shaped model)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--dataset", a->dataset, "Labelled dataset (.tsv/.jsonl) for accuracy (default: fidelity only)");
  auto* precisions = cmd->add_option("--precisions", a->precisions,
                                     "Formats, comma-separated: " + quant::cpu_format_names() +
                                         " (see `qjoule info --formats`), with options as NAME:OPTION (int4:g=64:asym, "
                                         "nf4:dq, int8:sq=0.5 for SmoothQuant)")
                         ->capture_default_str();
  auto* batch =
      cmd->add_option("--batch", a->batch, "Batch sizes, comma-separated (decoder models: 1, the default for them)")
          ->capture_default_str();
  auto* seq = cmd->add_option("--seq", a->seq,
                              "Sequence lengths in tokens, comma-separated (decoder models: prompt tokens prefilled)")
                  ->capture_default_str();
  cmd->add_option("--decode-tokens", a->decode_tokens,
                  "Decoder models: tokens generated (greedy, one per step) per timed decode repetition after the "
                  "prompt; --seq + this must fit max_position_embeddings")
      ->capture_default_str()
      ->check(in_range(1, 1e6));
  auto* threads = cmd->add_option("--threads", a->threads, "CPU thread counts, comma-separated (default: all cores)");
  cmd->add_option("--device", a->device,
                  "cpu, or cuda / cuda:N: encoder classifiers entirely on GPU N (fp32, tf32, fp16, bf16, int8, fp8, "
                  "int4, nf4), latency from CUDA events, energy from that GPU's NVML sensor")
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Batches run before timing")->capture_default_str()->check(in_range(0, 1e6));
  cmd->add_option("--iters", a->iters, "Timed batches per run (default: as many as fit --min-time)")
      ->check(in_range(1, 1e9));
  cmd->add_option("--min-time", a->min_time,
                  "Seconds of timed batches per run, at least (and at least 10 energy-counter updates)")
      ->capture_default_str()
      ->check(in_range(0, 86400));
  cmd->add_option("--idle", a->idle, "Seconds of idle power measured first, subtracted as net energy (with sensors)")
      ->capture_default_str()
      ->check(in_range(0, 3600));
  cmd->add_option("--cooldown", a->cooldown, "Seconds to sleep after each run")
      ->capture_default_str()
      ->check(in_range(0, 3600));
  cmd->add_option("--sweep", a->sweep, "Sweep file (JSON): defaults, swept keys, mode")->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out,
                  "Output folder for results.jsonl, results.csv, summary.md, report.html (default: a new qjoule-bench/<UTC time>)");
  cmd->add_flag("--resume", a->resume, "Continue a sweep: skip the runs already in OUT/results.jsonl");
  cmd->add_flag("--dry-run", a->dry_run,
                "Run nothing: print each run's predicted peak memory and whether it fits in the memory available "
                "now (a sweep skips, with one line, a decoder run predicted not to fit)");
  cmd->add_option("--max-accuracy-drop", a->max_accuracy_drop,
                  "Flag runs whose accuracy (or agreement) drops more than this many points below FP32")
      ->capture_default_str()
      ->check(in_range(0, 100));
  cmd->add_flag("--trace", a->trace,
                "Keep each run's power readings in OUT/traces/<run>.csv (time_s,sensor,energy_j,power_w)");
  cmd->add_option("--interval", a->interval_ms, "Energy sampling period in milliseconds")
      ->capture_default_str()
      ->check(above(0, 60000));
  cmd->add_option("--power-meter", a->power_meter, "External meter: file:PATH or cmd:COMMAND (CSV timestamp_s,watts)");
  cmd->add_option("--energy-estimate", a->estimate,
                  "Only when no sensor can measure: cpu-tdp=WATTS, scaled by CPU utilisation, labelled estimated");
  cmd->add_option("--text-column", a->text_column, "Dataset text column (default: sentence or text)");
  cmd->add_option("--label-column", a->label_column, "Dataset label column (default: label or labels)");
  cmd->add_flag("--slurm", a->slurm,
                "Submit the sweep to Slurm as one array job (each task: --slurm-chunk runs, into OUT/shards/) and a "
                "merge job into OUT/results.jsonl; with --resume, only runs recorded nowhere");
  cmd->add_option("--slurm-chunk", a->slurm_chunk, "Runs per Slurm array task")
      ->capture_default_str()
      ->check(in_range(1, 1e6));
  cmd->add_option("--slurm-opt", a->slurm_options,
                  "An sbatch option for the array job, repeatable: --slurm-opt=--partition=gpu --slurm-opt=--gres=gpu:1")
      ->allow_extra_args(false);
  cmd->add_flag("--slurm-dry-run", a->slurm_dry_run, "With --slurm: print the batch scripts, submit nothing");
  cmd->add_flag("--wait", a->wait, "With --slurm: wait for the merge job; exit 1 if a run failed or is missing");
  cmd->add_flag("--slurm-task", a->slurm_task, "(run by the array job's script) one array task")->group("");
  cmd->add_flag("--slurm-merge", a->slurm_merge, "(run by the merge job's script) merge the shards")->group("");
  cmd->callback([a, &ctx, precisions, batch, seq, threads] {
    for (auto* o : {precisions, batch, seq, threads})
      if (o->count() > 0) a->lists_given.push_back(o->get_name());
    a->batch_given = batch->count() > 0;
    run_bench(*a, ctx);
  });
}

}  // namespace qjoule::cli

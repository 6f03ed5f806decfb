// `qjoule bench`: sweeps of (model × precision × batch × seq × threads), each run timed, measured
// for energy, sized and scored, one record per run appended to OUT/results.jsonl as it finishes;
// then OUT/results.csv, OUT/summary.md and the paper table on the console. A decoder model runs
// batch 1 and times its prefill (--seq prompt tokens) and decode (--decode-tokens) phases apart.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/calibration_options.h"
#include "cli/checkpoint_precision.h"
#include "cli/bench_dry_run.h"
#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "qjoule/bench/calibration_cache.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/lm_quality.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/sweep.h"
#include "qjoule/bench/sweep_session.h"
#include "qjoule/error.h"
#include "qjoule/report/html_report.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/kernels/backend_registry.h"

namespace qjoule::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::string precisions = kernels::default_sweep_precisions(kernels::Backend::cpu);
  std::string batch = "1,8";
  std::string seq = "128";
  std::string threads;  // default: every hardware thread
  std::string device = "cpu";
  std::size_t iters = 0;  // 0: as many as fit --min-time
  std::string sweep;
  std::string out;  // default: qjoule-bench/<UTC time>, a new folder for each sweep
  bool resume = false, dry_run = false;
  bench::SweepSettings settings;  // what the runs measure with (bound to their flags below)
  bench::SlurmSettings slurm_settings;
  bool slurm = false, slurm_task = false, slurm_merge = false;  // submit; the two kinds of job it submits
  bool status = false;                                          // the state of a submitted sweep
  // Which list options were given on the command line (they may not be mixed with --sweep).
  std::vector<std::string> lists_given;
  bool batch_given = false;
  std::vector<std::string> lm_flags_given;  // --ctx, --stride, --max-tokens, --kl-base given
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

// --calib with the precisions that need it: each of them has it, and it has one of them; and the calibration
// inputs of every model that calibrates are there (text long enough, enough examples) before anything runs.
void check_calibration(const std::vector<bench::RunConfig>& configs, const bench::CalibrationSettings& calib) {
  const bench::RunConfig* calibrated = nullptr;
  std::set<std::string> models;
  for (const auto& c : configs) {
    if (!quant::needs_calibration(c.precision.spec_or_fail())) continue;
    if (calibrated == nullptr) calibrated = &c;
    models.insert(c.model);
  }
  if (calibrated != nullptr && calib.file.empty())
    fail("{}", model::calibration_file_needed(calibrated->precision.text()));
  if (calibrated == nullptr && !calib.file.empty())
    fail("--calib {}: no precision of the sweep calibrates; expected it with a calibrated one (e.g. int4:g=128:gptq)",
         calib.file);
  if (models.empty()) return;
  const std::string text = eval::read_text_file(calib.file, "--calib");
  for (const auto& m : models) bench::calibration_sequences_for(m, text, calib);
}

void run_bench(const BenchArgs& a, CommandContext& ctx) {
  if (a.status) {
    if (a.out.empty()) fail("--status needs --out DIR: the folder of a sweep submitted with --slurm");
    return bench::print_slurm_status(a.out);
  }
  const auto& runner = a.settings.runner;
  if (runner.min_time_s <= 0 && a.iters == 0)
    fail("--min-time {} is not positive, expected seconds > 0", runner.min_time_s);
  const auto configs = bench::expand_sweep(sweep_from_args(a));
  bench::validate_configs(configs, runner.decode_tokens);
  check_calibration(configs, runner.calibration);
  bench::validate_reference(configs, runner.lm.reference);
  if (runner.lm.text.empty() && !a.lm_flags_given.empty())
    fail("{} needs --text FILE: it sets how a decoder's text is scored", a.lm_flags_given.front());
  // --text: every model a decoder with a tokenizer, the text long enough, each --kl-base its model's.
  bench::LmQuality(runner.lm, ".", [](const std::string&) {}).check(configs);
  // --task: every model a decoder, every task file read and checked.
  bench::TaskAccuracy(runner.tasks, ".", [](const std::string&) {}).check(configs);
  if (runner.tasks.files.empty() && runner.tasks.limit != 0) fail("--task-limit needs --task FILE: it cuts each task");
  std::set<std::string> noted;
  for (const auto& c : configs) {
    if (noted.insert(c.precision.text()).second)
      if (const auto note = quant::old_spelling_note(c.precision.text()); !note.empty())
        fmt::print(stderr, "note: {}\n", note);
  }
  int most_threads = 0;
  for (const auto& c : configs) {
    if (c.threads > kMaxThreads)
      fail("run {}: {} threads is out of range, expected 1 to {}", bench::run_name(c), c.threads, kMaxThreads);
    most_threads = std::max(most_threads, c.threads);
  }
  warn_if_more_threads_than_cpus(most_threads, "--threads");
  if (a.dry_run) return print_bench_dry_run(configs, runner.decode_tokens);

  const bool slurm_job = a.slurm_task || a.slurm_merge;
  if (a.slurm && a.out.empty())
    fail("--slurm needs --out DIR: the folder of the sweep, on a file system every node sees");
  if ((a.resume || slurm_job) && a.out.empty()) fail("--resume needs --out DIR: the folder of the sweep to continue");
  const std::filesystem::path out = a.out.empty() ? bench::new_sweep_dir() : std::filesystem::path(a.out);
  const auto results = out / bench::kResultsFileName;
  std::error_code ec;
  if (!a.resume && !slurm_job && std::filesystem::exists(results, ec) && std::filesystem::file_size(results, ec) > 0)
    fail("{} already holds results; pass --resume to continue that sweep, or choose another --out", results.string());

  bench::SweepSettings settings = a.settings;
  settings.html_report = report::sweep_html_writer();
  if (a.iters > 0) settings.runner.iters = a.iters;
  bool ok = true;
  if (a.slurm) {
    ok = bench::submit_slurm_sweep(configs, out, settings, a.slurm_settings);
  } else if (a.slurm_task) {
    ok = bench::run_slurm_task(configs, out, settings);
  } else if (a.slurm_merge) {
    ok = bench::run_slurm_merge(configs, out, settings);
  } else {
    ok = bench::run_local_sweep(configs, out, settings);
  }
  if (!ok) ctx.exit_code = 1;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Sweep precisions, batch sizes, sequence lengths and threads; measure latency, throughput, energy, "
      "size and accuracy per run.");
  cmd->footer(
      "Each finished run is appended to OUT/results.jsonl at once (fsync), so a killed sweep loses only the run\n"
      "in progress; --resume skips what is recorded. OUT/results.csv, OUT/summary.md (the paper table, with\n"
      "speed-up, energy and accuracy deltas against FP32 of the same shape) and OUT/report.html (the table and\n"
      "the plots, one self-contained page) are written at the end.\n"
      "Without --model, an embedded DistilBERT-base-shaped model with random weights is used (fidelity only).\n"
      "A decoder model (Llama, Qwen2 or GPT-2 folder) runs batch 1: each run times the prefill of --seq prompt\n"
      "tokens and, in a second energy window (of --decode-windows parts), --decode-tokens greedy decode steps;\n"
      "the record has prefill and decode tokens/s (mean ± sd over repetitions) and mJ/token of each phase\n"
      "(docs/bench-records.md); with --text it also scores the text as `qjoule ppl` does: perplexity, and\n"
      "against the FP32 reference (computed once per sweep, kept in OUT/kl-base/, reused by --resume and by\n"
      "--kl-base) KL divergence and top tokens.\n"
      "Sweep file: {\"defaults\": {\"seq\": 128}, \"sweep\": {\"precision\": [\"fp32\", \"int8\"], \"batch\": [1, 8]},\n"
      "             \"mode\": \"cross_product\"}   (or \"one_at_a_time\")\n"
      "Examples:\n"
      "  qjoule bench                                   # the default sweep, a few minutes on 2 cores\n"
      "  qjoule bench --model ../shared/data/models/sst2-distilbert-mini \\\n"
      "               --dataset ../shared/data/sst2/dev.tsv --precisions fp32,int8,nf4 --batch 8\n"
      "  qjoule bench --model tests/fixtures/decoders/tiny-llama --precisions fp32,int8 --seq 64 --decode-tokens 32\n"
      "  qjoule bench --model tests/fixtures/decoders/tiny-llama --precisions fp32,int8,int4,nf4 --seq 64 \\\n"
      "               --text ../shared/data/wikitext2/test.txt --max-tokens 2048 --ctx 128 --out lm/\n"
      "  qjoule bench --sweep sweep.json --out results/ --resume");
  auto a = std::make_shared<BenchArgs>();
  cmd->add_option("--model", a->model, "Model folder (default: the embedded DistilBERT-base-shaped model)")
      ->check(CLI::ExistingDirectory);
  auto* dataset = cmd->add_option("--dataset", a->settings.runner.dataset,
                                  "Labelled dataset (.tsv/.jsonl) for accuracy (default: fidelity only)");
  auto* precisions =
      cmd->add_option("--precisions", a->precisions,
                      "Formats, comma-separated: " + kernels::backend_format_names(kernels::Backend::cpu) +
                          " (see `qjoule info --formats`), with options as NAME:OPTION (int4:g=64:asym, "
                          "nf4:dq, int8:sq=0.5 for SmoothQuant)")
          ->capture_default_str();
  auto* batch =
      cmd->add_option("--batch", a->batch, "Batch sizes, comma-separated (decoder models: 1, the default for them)")
          ->capture_default_str();
  auto* seq = cmd->add_option("--seq", a->seq,
                              "Sequence lengths in tokens, comma-separated (decoder models: prompt tokens prefilled)")
                  ->capture_default_str();
  cmd->add_option("--decode-tokens", a->settings.runner.decode_tokens,
                  "Decoder models: tokens generated (greedy, one per step) per timed decode repetition after the "
                  "prompt; --seq + this must fit max_position_embeddings")
      ->capture_default_str()
      ->check(in_range(1, 1e6));
  cmd->add_option("--decode-windows", a->settings.runner.decode_energy_windows,
                  "Decoder models: the decode phase timed in N back-to-back energy windows, each at least --min-time "
                  "(or its share of --iters); the record's decode energy is their whole, a note gives each window's "
                  "mJ/token and their spread")
      ->capture_default_str()
      ->check(in_range(1, 100));
  auto* threads = cmd->add_option("--threads", a->threads, "CPU thread counts, comma-separated (default: all cores)");
  cmd->add_option(
         "--device", a->device,
         "cpu, or cuda / cuda:N: the whole model (a decoder with its KV cache) on GPU N (fp32, tf32, fp16, "
         "bf16, int8, fp8, int4, nf4, mxfp4, nvfp4; without --precisions: fp32,bf16,int8,int4,nf4), latency from "
         "CUDA events, "
         "energy from that GPU's NVML sensor")
      ->capture_default_str();
  cmd->add_option("--warmup", a->settings.runner.warmup, "Batches run before timing")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  cmd->add_option("--iters", a->iters, "Timed batches per run (default: as many as fit --min-time)")
      ->check(in_range(1, 1e9));
  cmd->add_option("--min-time", a->settings.runner.min_time_s,
                  "Seconds of timed batches per run, at least (and at least 10 energy-counter updates); a decoder's "
                  "decode phase takes this for each of its --decode-windows")
      ->capture_default_str()
      ->check(in_range(0, 86400));
  cmd->add_option("--idle", a->settings.meter.idle_s,
                  "Seconds of idle power measured first, subtracted as net energy (with sensors)")
      ->capture_default_str()
      ->check(in_range(0, 3600));
  cmd->add_option("--cooldown", a->settings.runner.cooldown_s, "Seconds to sleep after each run")
      ->capture_default_str()
      ->check(in_range(0, 3600));
  cmd->add_option("--sweep", a->sweep, "Sweep file (JSON): defaults, swept keys, mode")->check(CLI::ExistingFile);
  cmd->add_option(
      "--out", a->out,
      "Output folder for results.jsonl, results.csv, summary.md, report.html (default: a new qjoule-bench/<UTC time>)");
  cmd->add_flag("--resume", a->resume, "Continue a sweep: skip the runs already in OUT/results.jsonl");
  cmd->add_flag("--dry-run", a->dry_run,
                "Run nothing: print each run's predicted peak memory and whether it fits in the memory available "
                "now (a sweep skips, with one line, a decoder run predicted not to fit)");
  auto& lm = a->settings.runner.lm;
  cmd->add_option(
      "--text", lm.text,
      "Decoder models: a UTF-8 text each run scores as `qjoule ppl` does (perplexity ± standard error, and "
      "against the FP32 reference, computed once per sweep into OUT/kl-base/: ΔPPL, mean/median/p99/max KL, "
      "same-top-token rate, RMS Δp)");
  auto* lm_ctx =
      cmd->add_option("--ctx", lm.ctx, "With --text: tokens per window (default: 512 or the model's positions)")
          ->check(in_range(2, 1e7));
  auto* lm_stride =
      cmd->add_option("--stride", lm.stride, "With --text: tokens between window starts (default: half of --ctx)")
          ->check(in_range(1, 1e7));
  auto* lm_max = cmd->add_option("--max-tokens", lm.max_tokens,
                                 "With --text: score its first N tokens (0: all; the reference is N x vocab x 2 bytes)")
                     ->capture_default_str()
                     ->check(zero_or_range(2, 1e12));
  auto* lm_bases = cmd->add_option("--kl-base", lm.kl_bases,
                                   "With --text: an FP32 reference to use instead of computing one (OUT/kl-base/*.qjkl "
                                   "of an earlier sweep, or qjoule ppl --save-kl-base), repeatable, one per model")
                       ->allow_extra_args(false);
  cmd->add_option("--reference", lm.reference,
                  "The unquantized model of pre-quantized checkpoints (GPTQ, AWQ, bitsandbytes): its FP32 run is "
                  "their reference (fidelity; with --text, the KL base)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--task", a->settings.runner.tasks.files,
                  "Decoder models: a multiple-choice task (JSON Lines: qjoule's, HellaSwag's or ARC's rows) each run "
                  "scores as `qjoule score` does (acc, acc_norm, and against FP32's answers, computed once per sweep "
                  "into OUT/task-base/: Δacc and the share of changed answers); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--task-limit", a->settings.runner.tasks.limit, "With --task: each task's first N items (0: all)")
      ->check(zero_or_range(1, 1e12, "every item"));
  add_calibration_options(cmd, a->settings.runner.calibration);
  cmd->add_option("--max-ppl-increase", a->settings.max_ppl_increase_pct,
                  "With --text: flag decoder runs whose perplexity is more than this many percent above FP32's")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  cmd->add_option(
         "--max-accuracy-drop", a->settings.max_accuracy_drop,
         "Flag runs whose accuracy (a classifier's, a decoder's on each --task, or the agreement) drops more than "
         "this many points below FP32")
      ->capture_default_str()
      ->check(in_range(0, 100));
  cmd->add_flag("--trace", a->settings.meter.trace,
                "Keep each run's power readings in OUT/traces/<run>.csv (time_s,sensor,energy_j,power_w)");
  cmd->add_option("--interval", a->settings.meter.interval_ms, "Energy sampling period in milliseconds")
      ->capture_default_str()
      ->check(above(0, 60000));
  cmd->add_option("--power-meter", a->settings.meter.power_meter,
                  "External meter: file:PATH or cmd:COMMAND (CSV timestamp_s,watts)");
  cmd->add_option("--energy-estimate", a->settings.meter.estimate,
                  "Only when no sensor can measure: cpu-tdp=WATTS, scaled by CPU utilisation, labelled estimated");
  cmd->add_option("--text-column", a->settings.runner.text_column, "Dataset text column (default: sentence or text)")
      ->needs(dataset);
  cmd->add_option("--label-column", a->settings.runner.label_column, "Dataset label column (default: label or labels)")
      ->needs(dataset);
  auto* slurm = cmd->add_flag(
      "--slurm", a->slurm,
      "Submit the sweep to Slurm as one array job (each task: --slurm-chunk runs, into OUT/shards/) and a "
      "merge job into OUT/results.jsonl; with --resume, only runs recorded nowhere");
  cmd->add_option("--slurm-chunk", a->slurm_settings.chunk, "Runs per Slurm array task")
      ->capture_default_str()
      ->check(in_range(1, 1e6))
      ->needs(slurm);
  cmd->add_option(
         "--slurm-opt", a->slurm_settings.sbatch_options,
         "An sbatch option for the array job, repeatable: --slurm-opt=--partition=gpu --slurm-opt=--gres=gpu:1")
      ->allow_extra_args(false)
      ->needs(slurm);
  cmd->add_flag("--slurm-dry-run", a->slurm_settings.dry_run, "With --slurm: print the batch scripts, submit nothing")
      ->needs(slurm);
  cmd->add_flag("--wait", a->slurm_settings.wait,
                "With --slurm: wait for the merge job; exit 1 if a run failed or is missing")
      ->needs(slurm);
  cmd->add_flag("--status", a->status, "With --out DIR: each run of the sweep submitted there (--slurm) and its state");
  cmd->add_flag("--slurm-task", a->slurm_task, "(run by the array job's script) one array task")->group("");
  cmd->add_flag("--slurm-merge", a->slurm_merge, "(run by the merge job's script) merge the shards")->group("");
  cmd->callback([a, &ctx, precisions, batch, seq, threads, lm_ctx, lm_stride, lm_max, lm_bases] {
    for (auto* o : {precisions, batch, seq, threads})
      if (o->count() > 0) a->lists_given.push_back(o->get_name());
    for (auto* o : {lm_ctx, lm_stride, lm_max, lm_bases})
      if (o->count() > 0) a->lm_flags_given.push_back(o->get_name());
    a->batch_given = batch->count() > 0;
    // On a GPU the default sweep is the default formats that have a CUDA kernel (w8 has none).
    if (precisions->count() == 0 && a->device.starts_with("cuda"))
      a->precisions = kernels::default_sweep_precisions(kernels::Backend::cuda);
    // A pre-quantized checkpoint's sweep, unless --precisions says otherwise: its own format.
    if (precisions->count() == 0 && !a->model.empty() && a->sweep.empty()) {
      if (const auto own = checkpoint_precision(a->model)) {
        a->precisions = own->spec;
        fmt::print(stderr, "precisions {} ({})\n", own->spec, own->origin);
      }
    }
    run_bench(*a, ctx);
  });
}

}  // namespace qjoule::cli

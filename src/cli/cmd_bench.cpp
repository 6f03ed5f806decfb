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
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/results_csv.h"
#include "qjoule/bench/results_store.h"
#include "qjoule/bench/sweep.h"
#include "qjoule/bench/sweep_identity.h"
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
};

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.0f}s", seconds);
  const auto s = static_cast<long>(seconds + 0.5);
  return fmt::format("{}m{:02d}s", s / 60, s % 60);
}

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

void run_bench(const BenchArgs& a, CommandContext& ctx) {
  if (a.min_time <= 0 && a.iters == 0) fail("--min-time {} is not positive, expected seconds > 0", a.min_time);
  const auto configs = bench::expand_sweep(sweep_from_args(a));
  bench::validate_configs(configs, a.decode_tokens);
  std::set<std::string> noted;
  for (const auto& c : configs) {
    if (!noted.insert(c.precision).second) continue;
    if (const auto note = quant::old_spelling_note(c.precision); !note.empty()) fmt::print(stderr, "note: {}\n", note);
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

  // Results: refuse to mix a new sweep into an old file unless resuming it.
  if (a.resume && a.out.empty()) fail("--resume needs --out DIR: the folder of the sweep to continue");
  std::string out_text = a.out;
  if (out_text.empty()) {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    out_text = std::string("qjoule-bench/") + stamp;
  }
  const std::filesystem::path out(out_text);
  const auto results = out / bench::kResultsFileName;
  std::error_code ec;
  if (!a.resume && std::filesystem::exists(results, ec) && std::filesystem::file_size(results, ec) > 0)
    fail("{} already holds results; pass --resume to continue that sweep, or choose another --out", results.string());
  auto store = bench::ResultsStore::open(out);
  bench::check_sweep_identity(out, bench::sweep_identity(configs, a.dataset));  // under the store's lock
  for (const auto& note : store.notes()) fmt::print(stderr, "note: {}\n", note);

  energy::DiscoveryOptions discovery;
  // CPU runs: a GPU's idle draw is not this work's energy, so NVML is read only for the GPUs that cuda runs
  // use, each matched with its NVML index by PCI address (CUDA's numbering can differ from NVML's).
  discovery.use_nvml = false;
  std::map<int, std::string> gpu_energy_sensors, gpu_energy_absent;
  for (const auto& c : configs) {
    if (!kernels::is_cuda_device(c.device)) continue;
    const int gpu = kernels::require_cuda_device(c.device);
    if (gpu_energy_sensors.count(gpu) > 0 || gpu_energy_absent.count(gpu) > 0) continue;
    const auto& status = kernels::cuda_device_status();
    const std::string bus = static_cast<std::size_t>(gpu) < status.pci_bus_ids.size()
                                ? status.pci_bus_ids[static_cast<std::size_t>(gpu)]
                                : std::string();
    std::string why = "the CUDA runtime gave no PCI address";
    const std::optional<unsigned> nvml = bus.empty() ? std::nullopt : energy::nvml_index_of_pci_bus_id(bus, why);
    if (!nvml) {
      gpu_energy_absent[gpu] = fmt::format("GPU {} ({}) has no NVML match: {}", gpu, bus.empty() ? "?" : bus, why);
      fmt::print(stderr, "energy: {}; its runs get no measured energy\n", gpu_energy_absent[gpu]);
      continue;
    }
    discovery.use_nvml = true;
    discovery.gpus.push_back(*nvml);
    gpu_energy_sensors[gpu] = fmt::format("nvml:gpu{}", *nvml);
  }
  discovery.power_meter = a.power_meter;
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::nanoseconds(static_cast<std::int64_t>(a.interval_ms * 1e6));
  if (!a.estimate.empty()) meter_options.estimate = energy::parse_energy_estimate(a.estimate);
  if (a.trace) meter_options.trace_capacity = std::size_t{1} << 20;
  energy::EnergyMeter meter(energy::discover_sensors(discovery), meter_options);
  meter.start();
  bool counted = false;  // a sensor whose energy goes into totals (psys and nested domains do not)
  for (const auto* s : meter.sensors()) counted |= s->counts_in_total;
  if (meter.sensors().empty()) {
    std::string why;
    for (const auto& absent : meter.absent()) why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", absent.source, absent.reason);
    fmt::print(stderr, "energy: unavailable ({}){}\n", why,
               a.estimate.empty() ? "" : "; an estimate is made, as asked (--energy-estimate), and labelled so");
  } else if (!counted) {
    fmt::print(stderr, "energy: no sensor here counts in totals (only whole-platform or nested domains); no idle "
                       "baseline taken\n");
  } else if (a.idle > 0) {
    fmt::print(stderr, "measuring idle power for {} (--idle 0 skips this)\n", energy::format_seconds(a.idle));
    meter.measure_idle(std::chrono::nanoseconds(static_cast<std::int64_t>(a.idle * 1e9)));
  }

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
  options.gpu_energy_sensors = gpu_energy_sensors;
  options.gpu_energy_absent = gpu_energy_absent;
  bench::BenchRunner runner(options, meter);

  if (configs.front().model == bench::kSyntheticModelName)
    fmt::print(stderr,
               "model: embedded DistilBERT-base-shaped classifier (6 layers, dim 768, 12 heads, FFN 3072, vocab "
               "30,522) with random weights and synthetic inputs; accuracy is fidelity to its FP32 run\n");
  bool any_decoder = false;
  for (const auto& c : configs) any_decoder = any_decoder || bench::is_decoder_model(c.model);
  if (any_decoder)
    fmt::print(stderr,
               "decoder model: each run times the prefill of --seq prompt tokens and {} greedy decode steps "
               "(--decode-tokens), batch 1, each phase in its own energy window\n",
               a.decode_tokens);
  std::size_t skipped = 0, failed = 0, done = 0;
  for (const auto& c : configs) skipped += store.has(bench::run_name(c)) ? 1 : 0;
  // --decode-tokens is not part of a run name: say so when a resumed sweep recorded another value.
  for (const auto& r : store.records())
    if (r.decode_tokens && *r.decode_tokens != a.decode_tokens) {
      fmt::print(stderr, "note: {} holds decoder runs with {} decode tokens (e.g. {}); this bench uses {}\n",
                 results.string(), *r.decode_tokens, r.run_name, a.decode_tokens);
      break;
    }
  const std::size_t to_run = configs.size() - skipped;
  if (skipped > 0) fmt::print(stderr, "resume: {} of {} runs already in {}; running the other {}\n", skipped,
                              configs.size(), results.string(), to_run);
  const auto started = std::chrono::steady_clock::now();
  std::size_t index = 0;
  for (const auto& c : configs) {
    ++index;
    const std::string name = bench::run_name(c);
    if (store.has(name)) continue;
    fmt::print(stderr, "[{:>{}}/{}] {} ...", index, std::to_string(configs.size()).size(), configs.size(), name);
    std::fflush(stderr);
    const bench::RunRecord r = runner.run(c);
    try {
      store.append(r);
    } catch (const Error&) {
      fmt::print(stderr, "\n");  // the error goes on its own line, not after the progress line's "..."
      throw;
    }
    ++done;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double eta = elapsed / double(done) * double(to_run - done);
    if (r.status != "ok") {
      ++failed;
      fmt::print(stderr, " failed: {}\n", r.error);
      continue;
    }
    std::string energy = r.j_per_inference ? fmt::format("{:.3g} J/inference", *r.j_per_inference) : "energy unavailable";
    std::string quality = r.accuracy ? fmt::format("accuracy {:.4f}", *r.accuracy)
                                     : fmt::format("agreement {:.3f}", r.top1_agreement.value_or(0.0));
    const std::string eta_text = done < to_run ? fmt::format(" (ETA {})", format_duration(eta)) : "";
    if (r.decode_tokens_per_s_mean) {
      const auto mj = [](const std::optional<double>& v) {
        return v ? fmt::format(", {:.3g} mJ/token", *v) : std::string();
      };
      std::string line = fmt::format(
          " prefill {} tokens: {:.1f} ± {:.1f} tokens/s{}; decode {} tokens: {:.1f} ± {:.1f} tokens/s ({:.2f} "
          "ms/token){}",
          r.prefill_tokens.value_or(0), r.prefill_tokens_per_s_mean.value_or(0.0),
          r.prefill_tokens_per_s_std.value_or(0.0), mj(r.prefill_mj_per_token), r.decode_tokens.value_or(0),
          *r.decode_tokens_per_s_mean, r.decode_tokens_per_s_std.value_or(0.0),
          r.decode_ms_per_token_mean.value_or(0.0), mj(r.decode_mj_per_token));
      if (!r.prefill_mj_per_token && !r.decode_mj_per_token) line += "; energy unavailable";
      fmt::print(stderr, "{}; {}{}\n", line, quality, eta_text);
      continue;
    }
    fmt::print(stderr, " p50 {:.2f} ms, {:.1f} seq/s, {}, {}{}\n", r.latency->p50_ms, r.sequences_per_s.value_or(0.0),
               energy, quality, eta_text);
  }

  bench::write_results_csv(store.records(), out / "results.csv");
  bench::write_summary_md(store.records(), out / "summary.md", a.max_accuracy_drop);
  // The HTML report is a view of the records: if it cannot be made (no Chart.js), the sweep's
  // results still stand, so that is a warning, not a failed bench.
  std::string report_line;
  try {
    report::ReportOptions ro;
    ro.max_accuracy_drop_pt = a.max_accuracy_drop;
    report::write_html_report(store.records(), out / "report.html", ro);
    report_line = ", " + (out / "report.html").string();
  } catch (const Error& e) {
    fmt::print(stderr, "warning: no report.html: {}\n", e.what());
  }
  fmt::print("{}\n", bench::format_paper_table(store.records(), a.max_accuracy_drop));
  fmt::print(stderr, "wrote {} ({} runs), {}, {}{}\n", results.string(), store.records().size(),
             (out / "results.csv").string(), (out / "summary.md").string(), report_line);
  if (failed > 0) {
    fmt::print(stderr, "{} of {} runs failed (recorded with their error)\n", failed, to_run);
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
  cmd->callback([a, &ctx, precisions, batch, seq, threads] {
    for (auto* o : {precisions, batch, seq, threads})
      if (o->count() > 0) a->lists_given.push_back(o->get_name());
    a->batch_given = batch->count() > 0;
    run_bench(*a, ctx);
  });
}

}  // namespace qjoule::cli

// `qjoule limits`: what this machine allows with a thread count, measured (memory read and STREAM
// triad bandwidth, the FP32 / BF16 / INT8 arithmetic peaks), from the per-machine cache when it still
// stands for this machine; the roofs every bench record's speeds are compared with.
#include <algorithm>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/host_capacity.h"
#include "qjoule/limits/limits_cache.h"

namespace qjoule::cli {
namespace {

struct LimitsOptions {
  std::string device = "cpu";
  int threads = 0;
  bool refresh = false;
  std::string json_path;
};

std::string figure_line(const limits::MachineLimits& l, const std::optional<double>& value, const char* key,
                        const char* label, const char* unit) {
  if (value) return fmt::format("  {:<14} {:>9.1f} {}\n", label, *value, unit);
  const std::string why = l.unavailable.contains(key) ? l.unavailable.at(key).get<std::string>() : "not measured";
  return fmt::format("  {:<14} {:>9} ({})\n", label, "unavailable", why);
}

void run_limits(const LimitsOptions& o) {
  const bool gpu = kernels::is_cuda_device(o.device);
  if (!gpu && o.device != "cpu") kernels::require_cuda_device(o.device);  // names what was wrong
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const limits::CachedLimits c = gpu ? limits::gpu_machine_limits(kernels::require_cuda_device(o.device), o.refresh)
                                     : limits::machine_limits(threads, o.refresh);
  const limits::MachineLimits& l = c.limits;
  std::string text =
      gpu ? fmt::format("machine limits of {} ({}): {}\n", l.device, l.machine, c.note)
          : fmt::format("machine limits with {} thread{}: {}\n", threads, threads == 1 ? "" : "s", c.note);
  if (gpu) {
    text += figure_line(l, l.read_gb_per_s, "read_gb_per_s", "device copy", "GB/s");
    text += figure_line(l, l.fp32_gflops, "fp32_gflops", "fp32", "GFLOP/s");
    text += figure_line(l, l.tf32_gflops, "tf32_gflops", "tf32", "GFLOP/s");
    text += figure_line(l, l.fp16_gflops, "fp16_gflops", "fp16", "GFLOP/s");
    text += figure_line(l, l.bf16_gflops, "bf16_gflops", "bf16", "GFLOP/s");
    text += figure_line(l, l.int8_gops, "int8_gops", "int8", "GOP/s");
    text += figure_line(l, l.fp8_gflops, "fp8_gflops", "fp8", "GFLOP/s");
  } else {
    text += figure_line(l, l.read_gb_per_s, "read_gb_per_s", "memory read", "GB/s");
    text += figure_line(l, l.triad_gb_per_s, "triad_gb_per_s", "STREAM triad", "GB/s");
    text += figure_line(l, l.fp32_gflops, "fp32_gflops", "fp32 FMA", "GFLOP/s");
    text += figure_line(l, l.bf16_gflops, "bf16_gflops", "bf16 dot", "GFLOP/s");
    text += figure_line(l, l.int8_gops, "int8_gops", "int8 dot", "GOP/s");
    if (l.amx_bf16_gflops || l.amx_int8_gops) {
      text += figure_line(l, l.amx_bf16_gflops, "amx_bf16_gflops", "amx bf16", "GFLOP/s");
      text += figure_line(l, l.amx_int8_gops, "amx_int8_gops", "amx int8", "GOP/s");
    }
    if (!l.amx.empty()) text += "  amx            " + l.amx + "\n";
  }
  text += "how: " + l.method + "\n";
  // Figures read from a cache (or a file) against what the cores give now: a peak taken on a busier
  // host reads low, and every run's % roof would read high for a month.
  if (!gpu && c.from_cache && l.fp32_gflops && *l.fp32_gflops > 0.0) {
    if (const auto now = limits::fp32_rate_now(threads); now && *now > limits::kLowPeakMultiple * *l.fp32_gflops)
      text += fmt::format(
          "! an FMA probe reads {:.0f} GFLOP/s now, {:.2f}x the cached fp32 peak: these figures were measured on a "
          "busier host; run `qjoule limits --refresh` when the machine is quiet\n",
          *now, *now / *l.fp32_gflops);
  }
  if (!l.contention.empty())
    text +=
        "! " + l.contention + ": these figures may be low; run `qjoule limits --refresh` when the machine is quiet\n";
  std::fputs(text.c_str(), stdout);
  if (!o.json_path.empty()) write_output("--json", o.json_path, limits::to_json(l).dump(2) + "\n");
}

}  // namespace

void add_limits_command(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<LimitsOptions>();
  auto* cmd = app.add_subcommand(
      "limits",
      "Measure what this machine allows with N threads: memory read and STREAM triad bandwidth, and the "
      "FP32 FMA, BF16 and INT8 dot-product peaks (a few seconds). Cached per machine and thread count; "
      "`qjoule bench` puts these roofs in every record and says how close each run came to them.");
  cmd->footer(
      "Examples:\n"
      "  qjoule limits                      # all cores; the cache when it still stands for this machine\n"
      "  qjoule limits --threads 1 --refresh --json limits.json\n"
      "  qjoule limits --device cuda:0       # the GPU's roofs (cached as limits-cuda0.json)\n"
      "Cache: $XDG_CACHE_HOME/qjoule/limits-t<N>.json (else ~/.cache/qjoule/); measured again when the\n"
      "CPU, microcode, memory size or kernel changed, or after 30 days. QJOULE_LIMITS_FILE=FILE: bench and\n"
      "this command use the limits in FILE (another machine's `--json`) instead of measuring.");
  cmd->add_option("--device", options->device,
                  "cpu, or cuda / cuda:N: GPU N's device-copy bandwidth and cuBLASLt rate per type")
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "Threads to measure with (default: all cores)")
      ->check(in_range(1, 4096));
  cmd->add_flag("--refresh", options->refresh, "Measure again even where the cache stands");
  cmd->add_option("--json", options->json_path, "Also write the limits as JSON to FILE (`-` for stdout)")
      ->type_name("FILE");
  cmd->callback([options, &ctx] {
    run_limits(*options);
    ctx.exit_code = 0;
  });
}

}  // namespace qjoule::cli

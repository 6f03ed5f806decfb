#include "cli/bench_dry_run.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "bench/peak_rss.h"
#include "qjoule/bench/memory_prediction.h"
#include "qjoule/error.h"

namespace qjoule::cli {

void print_bench_dry_run(const std::vector<bench::RunConfig>& configs, std::size_t decode_tokens) {
  const auto available = bench::available_memory_bytes();
  const auto baseline = bench::current_rss_bytes().value_or(0);
  fmt::print("dry run: nothing runs. Peak memory predicted per run ({}; baseline {} MiB: this process now), {}\n",
             bench::kMemoryPredictionMethod, baseline >> 20,
             available ? fmt::format("{} MiB available (MemAvailable)", *available >> 20)
                       : std::string("available memory unknown (no MemAvailable in /proc/meminfo)"));
  std::size_t width = 3;
  for (const auto& c : configs) width = std::max(width, bench::run_name(c).size());
  fmt::print("{:<{}}  {:>10}  {:>10}  {:>10}  {}\n", "run", width, "model MiB", "build MiB", "peak MiB", "fits");
  for (const auto& c : configs) {
    const std::string name = bench::run_name(c);
    bench::MemoryPrediction p;
    try {
      p = bench::predict_peak_memory(c, decode_tokens, baseline);
    } catch (const Error& e) {
      fmt::print("{:<{}}  fails: {}\n", name, width, e.what());
      continue;
    }
    if (!p.unavailable.empty()) {
      fmt::print("{:<{}}  unavailable: {}\n", name, width, p.unavailable);
      continue;
    }
    const bool fits = !available || p.peak_bytes() - p.baseline_bytes <= *available;
    fmt::print("{:<{}}  {:>10}  {:>10}  {:>10}  {}\n", name, width, p.model_bytes >> 20, p.build_transient_bytes >> 20,
               p.peak_bytes() >> 20,
               !available ? "unknown"
               : fits     ? "yes"
                          : "no: the sweep would skip it");
  }
}

}  // namespace qjoule::cli

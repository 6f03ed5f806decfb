#include "cli/roof_text.h"

#include <cstdio>

#include <fmt/format.h>

#include "bench/roofline_work.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/limits/limits_cache.h"

namespace qjoule::cli {
namespace {

constexpr const char* kOnGpu = "limit not measured on a GPU yet";

// The machine's limits with the threads the command runs on (the cache; measured once otherwise).
const limits::MachineLimits& machine() {
  static const limits::CachedLimits cached = [] {
    auto c = limits::machine_limits(kernels::num_threads());
    const int threads = kernels::num_threads();
    if (!c.from_cache)
      fmt::print(stderr, "machine limits with {} thread{}: {}\n", threads, threads == 1 ? "" : "s", c.note);
    return c;
  }();
  return cached.limits;
}

}  // namespace

std::string prefill_roof_text(const model::DecoderLM& m, int64_t seq, int64_t logits_rows, double tokens_per_s,
                              bool on_gpu) {
  if (on_gpu) return kOnGpu;
  std::string why;
  const auto p = limits::roof_point(bench::decoder_prefill_work(m, seq, logits_rows), tokens_per_s, machine(), why);
  if (!p) return "no roof: " + why;
  return fmt::format("{:.0f}% of the limit ({})", p->fraction * 100.0, p->bound);
}

std::string decode_roof_text(const model::DecoderLM& m, int64_t prompt, int64_t steps, double tokens_per_s,
                             bool on_gpu) {
  if (on_gpu) return kOnGpu;
  const auto& l = machine();
  const double bytes = bench::decoder_decode_bytes_per_token(m, prompt, steps);
  std::string why;
  const auto fraction = limits::memory_fraction(bytes, tokens_per_s, l, why);
  if (!fraction) return "no roof: " + why;
  return fmt::format("{:.0f}% of the limit (memory: {:.1f} of {:.1f} GB/s read{})", *fraction * 100.0,
                     bytes * tokens_per_s / 1e9, *l.read_gb_per_s,
                     *fraction > 1.0 ? "; above 100%: the weights were in the caches" : "");
}

}  // namespace qjoule::cli

#include "qjoule/limits/memory_bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

namespace qjoule::limits {
namespace {

constexpr int kPasses = 5;

std::int64_t buffer_bytes_for(std::int64_t llc) { return std::max<std::int64_t>(std::int64_t{128} << 20, 2 * llc); }

MemoryBandwidth measure_triad(int threads) {
  MemoryBandwidth t;
  t.llc_bytes = last_level_cache_bytes();
  t.buffer_bytes = buffer_bytes_for(t.llc_bytes);
  const std::int64_t n = t.buffer_bytes / static_cast<std::int64_t>(sizeof(double));
  std::unique_ptr<double[]> a(new double[static_cast<size_t>(n)]), b(new double[static_cast<size_t>(n)]),
      c(new double[static_cast<size_t>(n)]);
  double* pa = a.get();
  double* pb = b.get();
  double* pc = c.get();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) {  // first touch by the thread that later streams the element
    pa[i] = 0.0;
    pb[i] = 1.0;
    pc[i] = 2.0;
  }
  double best = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  t.gb_per_s = 3.0 * static_cast<double>(t.buffer_bytes) / best / 1e9;
  return t;
}

MemoryBandwidth measure_read(int threads) {
  MemoryBandwidth r;
  r.llc_bytes = last_level_cache_bytes();
  r.buffer_bytes = 2 * buffer_bytes_for(r.llc_bytes);  // as many bytes as the triad's two read arrays
  const std::int64_t n = r.buffer_bytes / static_cast<std::int64_t>(sizeof(std::uint64_t));
  std::unique_ptr<std::uint64_t[]> a(new std::uint64_t[static_cast<size_t>(n)]);
  std::uint64_t* pa = a.get();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t i = 0; i < n; ++i) pa[i] = static_cast<std::uint64_t>(i);
  double best = 1e30;
  volatile std::uint64_t sink = 0;  // the sums are used: the loads cannot be dropped
  for (int pass = 0; pass < kPasses; ++pass) {
    std::uint64_t total = 0;
    const auto t0 = std::chrono::steady_clock::now();
    // Four independent sums of 64-bit integers (associative: the compiler vectorises them).
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
    for (std::int64_t i = 0; i < n; i += 4) total += pa[i] + pa[i + 1] + pa[i + 2] + pa[i + 3];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    sink = sink + total;
  }
  r.gb_per_s = static_cast<double>(r.buffer_bytes) / best / 1e9;
  return r;
}

template <MemoryBandwidth (*Measure)(int)>
const MemoryBandwidth& cached(int threads) {
  static std::mutex mutex;
  static std::map<int, MemoryBandwidth> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(threads);
  if (it == cache.end()) it = cache.emplace(threads, Measure(threads)).first;
  return it->second;
}

}  // namespace

std::int64_t last_level_cache_bytes() {
  std::int64_t best = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (!(in >> text) || text.empty()) continue;
    std::int64_t value = std::atoll(text.c_str());
    if (text.back() == 'K') value <<= 10;
    if (text.back() == 'M') value <<= 20;
    best = std::max(best, value);
  }
  return best;
}

const MemoryBandwidth& measured_triad(int threads) { return cached<measure_triad>(threads); }
const MemoryBandwidth& measured_read(int threads) { return cached<measure_read>(threads); }

std::string triad_method() {
  return "STREAM triad a = b + s*c, FP64 arrays each >= 2x the last-level cache (>= 128 MiB), best of 5 passes, "
         "24 bytes per element";
}

std::string read_method() {
  return "streaming sum of 64-bit words over a buffer >= 4x the last-level cache (>= 256 MiB), best of 5 passes, "
         "bytes read";
}

}  // namespace qjoule::limits

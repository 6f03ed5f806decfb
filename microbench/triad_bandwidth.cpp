#include "triad_bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

namespace qjoule::bench {
namespace {

// The largest cache of cpu0 (index3 is the L3 where there is one), from sysfs; 0 when unreadable.
std::int64_t llc_bytes() {
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

TriadBandwidth measure(int threads) {
  TriadBandwidth t;
  t.llc_bytes = llc_bytes();
  t.array_bytes = std::max<std::int64_t>(std::int64_t{128} << 20, 2 * t.llc_bytes);
  const std::int64_t n = t.array_bytes / static_cast<std::int64_t>(sizeof(double));
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
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  t.gb_per_s = 3.0 * static_cast<double>(t.array_bytes) / best / 1e9;
  return t;
}

}  // namespace

const TriadBandwidth& measured_triad(int threads) {
  static std::mutex mutex;
  static std::map<int, TriadBandwidth> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(threads);
  if (it == cache.end()) it = cache.emplace(threads, measure(threads)).first;
  return it->second;
}

std::string triad_method() {
  return "STREAM triad a = b + s*c, FP64 arrays each >= 2x the last-level cache (>= 128 MiB), best of 5 passes, "
         "24 bytes per element";
}

}  // namespace qjoule::bench

#include "qjoule/limits/memory_bandwidth.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

namespace qjoule::limits {
namespace {

constexpr int kPasses = 5;

// Sums of n 64-bit words (n a multiple of 32, p 64-byte aligned) with four independent vector
// accumulators: the loads are the work (a plain loop's scalar or SSE2 sum reads ~35% slower here).
__attribute__((target("avx512f"))) std::uint64_t sum_avx512(const std::uint64_t* p, std::int64_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) std::uint64_t t[8];  // (not _mm512_reduce_add_epi64: GCC 12 warns inside it)
  _mm512_store_si512(t, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::uint64_t* p, std::int64_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) std::uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t),
                     _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return t[0] + t[1] + t[2] + t[3];
}

std::uint64_t sum_plain(const std::uint64_t* p, std::int64_t n) {
  std::uint64_t s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += p[i];
  return s;
}

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
  std::unique_ptr<std::uint64_t, decltype(&std::free)> buffer(
      static_cast<std::uint64_t*>(std::aligned_alloc(64, static_cast<size_t>(r.buffer_bytes))), &std::free);
  std::uint64_t* pa = buffer.get();
  const auto sum = __builtin_cpu_supports("avx512f") ? sum_avx512
                   : __builtin_cpu_supports("avx2")  ? sum_avx2
                                                     : sum_plain;
  // Each thread reads the same whole-32-word slice in every pass (and touched it first).
  const auto slice = [n, threads](int t) {
    const std::int64_t chunk = n / threads / 32 * 32;
    return std::make_pair(t * chunk, t == threads - 1 ? n - (threads - 1) * chunk : chunk);
  };
#pragma omp parallel num_threads(threads)
  {
    const auto [begin, count] = slice(omp_get_thread_num());
    for (std::int64_t i = begin; i < begin + count; ++i) pa[i] = static_cast<std::uint64_t>(i);
  }
  double best = 1e30;
  volatile std::uint64_t sink = 0;  // the sums are used: the loads cannot be dropped
  for (int pass = 0; pass < kPasses; ++pass) {
    std::uint64_t total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const auto [begin, count] = slice(omp_get_thread_num());
      total += sum(pa + begin, count / 32 * 32) + sum_plain(pa + begin + count / 32 * 32, count % 32);
    }
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
  return "streaming sum of 64-bit words (AVX-512 / AVX2, 4 accumulators) over a buffer >= 4x the last-level cache "
         "(>= 256 MiB), best of 5 passes, bytes read";
}

}  // namespace qjoule::limits

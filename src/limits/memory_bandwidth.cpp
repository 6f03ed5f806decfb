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
#include <new>

#include "qjoule/io/huge_pages.h"

namespace qjoule::limits {
namespace {

constexpr int kPasses = 5;
constexpr int kStreams = 4;  // streams a thread in the read's second form

// Sums of n 64-bit words (n a multiple of 32 · S, p 64-byte aligned) with four independent vector
// accumulators: the loads are the work (a plain loop's scalar or SSE2 sum reads ~35% slower here). The
// words are read as S streams side by side (stream s: the s-th of S equal parts, 256 bytes of each in
// turn), as a GEMV that reads several weight rows at once does: on 4 KiB pages a single stream stalls
// at every page's end (Zen 4 VM, 2 threads: 27-31 GB/s as one stream, 47-48 as four).
template <int S>
__attribute__((target("avx512f"))) std::uint64_t sum_avx512(const std::uint64_t* p, std::int64_t n) {
  const std::int64_t per = n / S;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < per; i += 32) {
    for (int s = 0; s < S; ++s) {
      const std::uint64_t* q = p + s * per + i;
      a0 = _mm512_add_epi64(a0, _mm512_load_si512(q));
      a1 = _mm512_add_epi64(a1, _mm512_load_si512(q + 8));
      a2 = _mm512_add_epi64(a2, _mm512_load_si512(q + 16));
      a3 = _mm512_add_epi64(a3, _mm512_load_si512(q + 24));
    }
  }
  alignas(64) std::uint64_t t[8];  // (not _mm512_reduce_add_epi64: GCC 12 warns inside it)
  _mm512_store_si512(t, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

template <int S>
__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::uint64_t* p, std::int64_t n) {
  const std::int64_t per = n / S;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (std::int64_t i = 0; i < per; i += 16) {
    for (int s = 0; s < S; ++s) {
      const std::uint64_t* q = p + s * per + i;
      a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(q)));
      a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 4)));
      a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 8)));
      a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(q + 12)));
    }
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

// n elements on 2 MiB transparent huge pages where the kernel gives them, as a model's weights are held
// (qjoule/io/huge_pages.h): the roof is measured on the pages the decode reads. Untouched until the
// threads that stream it write it first.
template <class T>
class HugePageArray {
 public:
  explicit HugePageArray(std::int64_t n)
      : n_(static_cast<std::size_t>(n)), p_(io::HugePageAllocator<T>{}.allocate(n_)) {}
  ~HugePageArray() { io::HugePageAllocator<T>{}.deallocate(p_, n_); }
  HugePageArray(const HugePageArray&) = delete;
  HugePageArray& operator=(const HugePageArray&) = delete;
  T* get() const { return p_; }

 private:
  std::size_t n_;
  T* p_;
};

MemoryBandwidth measure_triad(int threads) {
  MemoryBandwidth t;
  t.llc_bytes = last_level_cache_bytes();
  t.buffer_bytes = buffer_bytes_for(t.llc_bytes);
  const std::int64_t n = t.buffer_bytes / static_cast<std::int64_t>(sizeof(double));
  const HugePageArray<double> a(n), b(n), c(n);
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

// The best of `passes` timed reads of a buffer of `buffer_bytes` on `threads` threads, each thread's part read
// as one stream and as kStreams interleaved streams, taking turns pass by pass (the plain loop: one stream).
double read_gb_per_s(int threads, std::int64_t buffer_bytes, int passes) {
  const std::int64_t n = buffer_bytes / static_cast<std::int64_t>(sizeof(std::uint64_t));
  const HugePageArray<std::uint64_t> buffer(n);
  std::uint64_t* pa = buffer.get();
  using Sum = std::uint64_t (*)(const std::uint64_t*, std::int64_t);
  const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  const Sum sums[2] = {avx512 ? sum_avx512<1>
                       : avx2 ? sum_avx2<1>
                              : sum_plain,
                       avx512 ? sum_avx512<kStreams>
                       : avx2 ? sum_avx2<kStreams>
                              : sum_plain};
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
  for (int pass = 0; pass < passes; ++pass) {
    const Sum sum = sums[pass % 2];
    std::uint64_t total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const auto [begin, count] = slice(omp_get_thread_num());
      constexpr std::int64_t kWhole = 32 * kStreams;  // words every sum takes whole
      total +=
          sum(pa + begin, count / kWhole * kWhole) + sum_plain(pa + begin + count / kWhole * kWhole, count % kWhole);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    sink = sink + total;
  }
  return static_cast<double>(n * static_cast<std::int64_t>(sizeof(std::uint64_t))) / best / 1e9;
}

MemoryBandwidth measure_read(int threads) {
  MemoryBandwidth r;
  r.llc_bytes = last_level_cache_bytes();
  r.buffer_bytes = 2 * buffer_bytes_for(r.llc_bytes);  // as many bytes as the triad's two read arrays
  r.gb_per_s = read_gb_per_s(threads, r.buffer_bytes, 2 * kPasses);
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

std::optional<double> read_rate_now(int threads) {
  if (threads < 1) return std::nullopt;
  try {
    return read_gb_per_s(threads, buffer_bytes_for(2 * last_level_cache_bytes()), 4);  // 4x the LLC, >= 128 MiB
  } catch (const std::bad_alloc&) {
    return std::nullopt;  // no room beside the model: not measured
  }
}

std::string triad_method() {
  return "STREAM triad a = b + s*c, FP64 arrays each >= 2x the last-level cache (>= 128 MiB) on 2 MiB huge pages "
         "where the kernel gives them (as the weights), best of 5 passes, 24 bytes per element";
}

std::string read_now_method() {
  return "the read's streaming sum over 4x the last-level cache (>= 128 MiB) on 2 MiB huge pages, 1 and 4 interleaved "
         "streams, best of 4 passes";
}

std::string read_method() {
  return "streaming sum of 64-bit words (AVX-512 / AVX2, 4 accumulators) over a buffer >= 4x the last-level cache "
         "(>= 256 MiB) on 2 MiB huge pages where the kernel gives them (as the weights), each thread's part read as "
         "1 and as 4 interleaved streams (as a GEMV over several rows), best of 5 passes each, bytes read";
}

}  // namespace qjoule::limits

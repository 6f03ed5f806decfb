// Times one linear layer's matrix product in every format qjoule runs for real, at DistilBERT-base
// shapes: tokens M = 1, 128, 1024; K×N (in × out) = 768×768, 768×3072, 3072×768; 1 thread and all
// hardware threads. Counters:
//   GOP/s      2·M·N·K per iteration over the timing loop's wall time (the layer's whole forward: activation
//              quantization, matrix product, dequantization / bias);
//   peak_frac  GOP/s over this CPU's measured peak for the same thread count — the FP32 FMA peak for
//              formats that compute in FP32 (fp32, bf16, fp16, w8, int4, nf4), the int8
//              vpmaddubsw peak for formats with integer dot products (int8, int4:a8); see cpu_peak.h.
// The label is the kernel_path that actually ran and which peak was used.
// Short run: bench_linear --benchmark_min_time=0.05 (see bench/README.md).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "cpu_peak.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/kernels/threads.h"

namespace {

using qjoule::kernels::Linear;

std::vector<float> random_vector(size_t n, unsigned seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Layers are built once per (spec, K, N) and shared by every M and thread count.
const Linear& layer_for(const std::string& spec, int64_t k, int64_t n) {
  static std::map<std::tuple<std::string, int64_t, int64_t>, std::unique_ptr<Linear>> cache;
  auto key = std::make_tuple(spec, k, n);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  const auto w = random_vector(size_t(n * k), 1, 0.05f);
  const auto b = random_vector(size_t(n), 2, 0.1f);
  auto layer = qjoule::kernels::make_linear(qjoule::kernels::parse_precision(spec), w.data(), b.data(), n, k,
                                            fmt::format("bench.{}x{}", k, n));
  return *cache.emplace(key, std::move(layer)).first->second;
}

bool uses_int8_peak(const std::string& spec) { return spec == "int8" || spec == "int4:a8"; }

void bm_linear(benchmark::State& state, const std::string& spec) {
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  qjoule::kernels::set_num_threads(threads);
  const Linear& layer = layer_for(spec, k, n);
  const auto x = random_vector(size_t(m * k), 3, 1.0f);
  std::vector<float> y(size_t(m * n));
  layer.forward(x.data(), m, y.data());  // warm-up: primitive creation, scratch allocation
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    layer.forward(x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Plain values over the loop's own wall time (the same span UseRealTime measures); a kIsRate
  // counter would print as "GOP/s=12.3/s".
  const double gops = 2.0 * double(m) * double(n) * double(k) * double(state.iterations()) / seconds / 1e9;
  const qjoule::bench::CpuPeak& peak = qjoule::bench::measured_peak(threads);
  const double peak_gops = uses_int8_peak(spec) ? peak.int8_gops : peak.fp32_gflops;
  state.counters["GOP/s"] = gops;
  if (peak_gops > 0.0) state.counters["peak_frac"] = gops / peak_gops;
  state.SetLabel(fmt::format("{} | vs {} peak {:.0f}", layer.kernel_path(), uses_int8_peak(spec) ? "int8" : "fp32",
                             peak_gops));
}

}  // namespace

int main(int argc, char** argv) {
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<int> thread_counts = {1};
  if (hw > 1) thread_counts.push_back(hw);
  benchmark::AddCustomContext("peak_method", qjoule::bench::peak_method());
  for (int t : thread_counts) {
    const auto& p = qjoule::bench::measured_peak(t);
    benchmark::AddCustomContext(fmt::format("peak_{}t", t),
                                fmt::format("fp32 {:.1f} GFLOP/s, int8 {:.1f} GOP/s", p.fp32_gflops, p.int8_gops));
  }
  const std::vector<std::string> specs = {"fp32", "bf16", "fp16", "int8", "w8", "int4", "int4:a8", "nf4"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{768, 768}, {768, 3072}, {3072, 768}};
  for (const std::string& spec : specs) {
    auto* b = benchmark::RegisterBenchmark(("linear/" + spec).c_str(), bm_linear, spec);
    b->ArgNames({"M", "K", "N", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (int t : thread_counts)
      for (int64_t m : {1, 128, 1024})
        for (auto [k, n] : shapes) b->Args({m, k, n, t});
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

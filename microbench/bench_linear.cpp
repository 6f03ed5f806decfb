// Times one linear layer's matrix product in every format qjoule runs for real, at the shapes of
// DistilBERT-base (K×N = in × out: 768×768, 768×3072, 3072×768) and of a 1B Llama (TinyLlama-1.1B:
// 2048×2048, 2048×256 (K/V with 4 KV heads), 2048×5632, 5632×2048); tokens M = 1 (decode / GEMV) and
// 128 (prefill); 1 thread and all hardware threads. Counters:
//   GOP/s      2·M·N·K per iteration over the timing loop's wall time (the layer's whole forward: activation
//              quantization, matrix product, dequantization / bias);
//   peak_frac  GOP/s over this CPU's measured peak for the same thread count — the FP32 FMA peak for
//              formats that compute in FP32 (fp32, bf16, fp16, w8, int4, nf4), the int8
//              vpmaddubsw peak for formats with integer dot products (int8, int4:a8); see qjoule/limits/cpu_peak.h;
//   GB/s       M <= 4 only: the layer's bytes held (packed weights, scales, bias) per iteration over the
//              wall time, the traffic a GEMV cannot avoid; the benchmark cycles through enough copies of
//              the layer (their bytes >= 2x the last-level cache) that every iteration reads its weights
//              from memory, not from the cache (at larger M one layer is reused from the cache, so no
//              bandwidth figure is reported);
//   triad_frac M <= 4 only: GB/s over the STREAM triad bandwidth measured in this program for the same thread count
//              (qjoule/limits/memory_bandwidth.h): how close a GEMV comes to the memory limit.
// The label is the kernel_path that actually ran and which peak was used.
// Short run: bench_linear --benchmark_min_time=0.05 (see microbench/README.md); one format and the GEMVs:
//   bench_linear --benchmark_filter='linear/int4/M:1/'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/memory_bandwidth.h"
#include "qjoule/kernels/linear_weight_only.h"
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

constexpr int64_t kGemvMaxM = 4;  // M up to this: weights must come from memory (a ring of copies)

// Enough copies of a layer of `bytes` that together they fill twice the last-level cache.
int copies_beyond_cache(std::size_t bytes) {
  const std::int64_t llc = qjoule::limits::measured_triad(1).llc_bytes;
  const std::int64_t target = 2 * (llc > 0 ? llc : std::int64_t{64} << 20);
  return static_cast<int>(std::max<std::int64_t>(1, (target + std::int64_t(bytes) - 1) / std::int64_t(bytes)));
}

// Layers are built once per (spec, K, N, ring) and shared by every M and thread count: one layer, or
// (ring) as many copies as copies_beyond_cache asks for (the same weights, held apart).
const std::vector<std::unique_ptr<Linear>>& layers_for(const std::string& spec, int64_t k, int64_t n, bool ring) {
  static std::map<std::tuple<std::string, int64_t, int64_t, bool>, std::vector<std::unique_ptr<Linear>>> cache;
  auto key = std::make_tuple(spec, k, n, ring);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto w = random_vector(size_t(n * k), 1, 0.05f);
  const auto b = random_vector(size_t(n), 2, 0.1f);
  const auto format = qjoule::quant::parse_format_spec(spec);
  const std::string name = fmt::format("bench.{}x{}", k, n);
  std::vector<std::unique_ptr<Linear>> layers;
  layers.push_back(qjoule::kernels::make_linear(format, w.data(), b.data(), n, k, name));
  const int copies = ring ? copies_beyond_cache(layers.front()->bytes_held()) : 1;
  while (static_cast<int>(layers.size()) < copies) {
    layers.push_back(qjoule::kernels::make_linear(format, w.data(), b.data(), n, k, name));
  }
  return cache.emplace(key, std::move(layers)).first->second;
}

bool uses_int8_peak(const std::string& spec) { return spec == "int8" || spec == "int4:a8"; }

void bm_linear(benchmark::State& state, const std::string& name) {
  // "FORMAT|no_vbmi": the FP4 kernels without AVX512_VBMI's code gather (as on CPUs that lack it).
  const bool no_vbmi = name.ends_with("|no_vbmi");
  const std::string spec = no_vbmi ? name.substr(0, name.size() - 8) : name;
  qjoule::kernels::set_fp4_codes_by_vbmi(!no_vbmi);
  const int64_t m = state.range(0), k = state.range(1), n = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  qjoule::kernels::set_num_threads(threads);
  const auto& layers = layers_for(spec, k, n, m <= kGemvMaxM);
  const auto x = random_vector(size_t(m * k), 3, 1.0f);
  std::vector<float> y(size_t(m * n));
  for (const auto& layer : layers) layer->forward(x.data(), m, y.data());  // warm-up: primitives, scratch
  size_t next = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    layers[next]->forward(x.data(), m, y.data());
    next = next + 1 == layers.size() ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Plain values over the loop's own wall time (the same span UseRealTime measures); a kIsRate
  // counter would print as "GOP/s=12.3/s".
  const double iters = double(state.iterations());
  const double gops = 2.0 * double(m) * double(n) * double(k) * iters / seconds / 1e9;
  const double gbps = double(layers.front()->bytes_held()) * iters / seconds / 1e9;
  const qjoule::limits::CpuPeak& peak = qjoule::limits::measured_peak(threads);
  const double peak_gops = (uses_int8_peak(spec) ? peak.int8_gops : peak.fp32_gflops).value_or(0.0);
  const double triad = qjoule::limits::measured_triad(threads).gb_per_s;
  state.counters["GOP/s"] = gops;
  if (peak_gops > 0.0) state.counters["peak_frac"] = gops / peak_gops;
  if (m <= kGemvMaxM) {  // only where every forward reads its weights from memory (the ring of copies)
    state.counters["GB/s"] = gbps;
    if (triad > 0.0) state.counters["triad_frac"] = gbps / triad;
  }
  state.SetLabel(fmt::format("{} | vs {} peak {:.0f}, triad {:.1f} GB/s{}", layers.front()->kernel_path(),
                             uses_int8_peak(spec) ? "int8" : "fp32", peak_gops, triad,
                             layers.size() > 1 ? fmt::format(", {} copies", layers.size()) : ""));
}

}  // namespace

// Large batches: one encoder pass (about 1,024 tokens: the classifier runs a batch in passes of whole
// sequences, QJOULE_TOKENS_PER_PASS) and 32 sequences of 128 tokens in one product.
constexpr int64_t kPassM = 1024, kBatchM = 4096;

int main(int argc, char** argv) {
  const int hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<int> thread_counts = {1};
  if (hw > 1) thread_counts.push_back(hw);
  benchmark::AddCustomContext("peak_method", qjoule::limits::peak_method());
  for (int t : thread_counts) {
    const auto& p = qjoule::limits::measured_peak(t);
    benchmark::AddCustomContext(
        fmt::format("peak_{}t", t),
        fmt::format("fp32 {:.1f} GFLOP/s, int8 {:.1f} GOP/s", p.fp32_gflops.value_or(0.0), p.int8_gops.value_or(0.0)));
  }
  for (int t : thread_counts) {
    const auto& triad = qjoule::limits::measured_triad(t);
    benchmark::AddCustomContext(fmt::format("triad_{}t", t), fmt::format("{:.1f} GB/s", triad.gb_per_s));
  }
  benchmark::AddCustomContext("triad_method", qjoule::limits::triad_method());
  const std::vector<std::string> specs = {"fp32",          "bf16",    "fp16",         "int8",   "w8",
                                          "int4",          "int4:a8", "nf4",          "nf4:dq", "mxfp4",
                                          "mxfp4|no_vbmi", "nvfp4",   "nvfp4|no_vbmi"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{768, 768},   {768, 3072}, {3072, 768},  // DistilBERT-base
                                                           {2048, 2048}, {2048, 256}, {2048, 5632},
                                                           {5632, 2048}};  // 1B Llama (TinyLlama-1.1B)
  // Large batches (batch × seq tokens in one forward): DistilBERT-base and the SST-2 DistilBERT-mini.
  const std::vector<std::pair<int64_t, int64_t>> batch_shapes = {{768, 768}, {768, 3072}, {3072, 768},
                                                                 {256, 768}, {256, 1024}, {1024, 256}};
  for (const std::string& spec : specs) {
    auto* b = benchmark::RegisterBenchmark(("linear/" + spec).c_str(), bm_linear, spec);
    b->ArgNames({"M", "K", "N", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
    for (int t : thread_counts)
      for (int64_t m : {1, 32, 128})
        for (auto [k, n] : shapes) b->Args({m, k, n, t});
    for (int t : thread_counts)
      for (int64_t m : {kPassM, kBatchM})
        for (auto [k, n] : batch_shapes) b->Args({m, k, n, t});
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Times causal self-attention over an FP32 KV cache (qjoule::kernels::causal_attention_f32) at the decoder
// shapes qjoule runs: TinyLlama / Llama (32 query heads over 4 KV heads of 64), Qwen3-0.6B (16 over 8 of 128)
// and Mistral / Mixtral (32 over 8 of 128); one new token (decode) over a cache of 128, 512 and 2048 keys, and
// a 128-token prefill; 1 thread and all hardware threads. Counters:
//   keys/s  query-head × key pairs scored per second (QKᵀ, softmax and PV for one pair);
//   GB/s    decode only: the K and V rows read per second (each KV head's rows once).
// Short run: bench_attention --benchmark_min_time=0.05
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/threads.h"

namespace {

struct Shape {
  const char* name;
  int64_t heads, kv_heads, head_dim;
};
constexpr Shape kShapes[] = {{"tinyllama", 32, 4, 64}, {"qwen3-0.6b", 16, 8, 128}, {"mistral", 32, 8, 128}};

std::vector<float> random_vector(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// args: shape index, keys before the new tokens (past), new tokens, threads.
void attention(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  const int64_t past = state.range(1), n_new = state.range(2);
  qjoule::kernels::set_num_threads(static_cast<int>(state.range(3)));
  const int64_t q_stride = s.heads * s.head_dim, kv_stride = s.kv_heads * s.head_dim;
  const auto q = random_vector(static_cast<size_t>(n_new * q_stride), 1);
  const auto k = random_vector(static_cast<size_t>((past + n_new) * kv_stride), 2);
  const auto v = random_vector(static_cast<size_t>((past + n_new) * kv_stride), 3);
  std::vector<float> ctx(static_cast<size_t>(n_new * q_stride));
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  for (auto _ : state) {
    qjoule::kernels::causal_attention_f32(q.data(), q_stride, k.data(), v.data(), kv_stride, past, n_new, s.heads,
                                          s.kv_heads, s.head_dim, scale, ctx.data());
    benchmark::DoNotOptimize(ctx.data());
  }
  // Pairs: each new token t reads past + t + 1 keys, in every query head.
  const double pairs = static_cast<double>(s.heads) * (static_cast<double>(n_new) * past + n_new * (n_new + 1) / 2.0);
  state.counters["keys/s"] = benchmark::Counter(pairs, benchmark::Counter::kIsIterationInvariantRate);
  if (n_new == 1) {
    const double bytes = 2.0 * static_cast<double>(past + 1) * static_cast<double>(kv_stride) * sizeof(float);
    state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.SetLabel(s.name);
}

void shapes(benchmark::internal::Benchmark* b) {
  const int64_t all = std::max<int64_t>(1, std::thread::hardware_concurrency());
  for (int64_t shape = 0; shape < 3; ++shape)
    for (int64_t threads : {int64_t{1}, all}) {
      for (int64_t past : {128, 512, 2048}) b->Args({shape, past, 1, threads});
      b->Args({shape, 0, 128, threads});
    }
  b->ArgNames({"shape", "past", "new", "threads"});
}

BENCHMARK(attention)->Apply(shapes)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

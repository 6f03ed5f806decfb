// End to end: the whole DistilBERT-base-shaped classifier (random weights from a fixed seed, see
// qjoule/model/synthetic/synthetic_encoder.h) at batch 8 × 128 and 1 × 128 tokens, in every format that runs for
// real, on 2 threads (and on every hardware thread when there are more). Counters:
//   seq/s     sequences per second over the timing loop's wall time;
//   GOP/s     the model's arithmetic per forward (2·M·N·K over every Linear, plus the attention
//             products 4·batch·seq²·hidden per block) over wall time;
// After the runs it prints each format's speed-up over fp32 at the same thread count and batch, measured
// in this one run: the median over repetitions of fp32's time over the format's. On a noisy machine run
// repetitions in random order, so that a slow spell hits every format alike:
//   bench_model_e2e --benchmark_min_time=1 --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// Every format's model stays built (about 1 GB in all) so that repetitions can interleave.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "qjoule/kernels/make_linear.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"

namespace {

using qjoule::model::EncoderClassifier;

constexpr int64_t kSeq = 128;

const qjoule::model::EncoderParams& base_params() {
  static const auto params = qjoule::model::synthetic_encoder_params(qjoule::model::distilbert_base_spec());
  return params;
}

// Each format's model, built on first use and kept (fp32 holds 265 MB, the others less).
const EncoderClassifier& model_for(const std::string& precision) {
  static std::map<std::string, std::unique_ptr<EncoderClassifier>> models;
  auto& model = models[precision];
  if (!model) {
    qjoule::model::QuantizationOptions q;
    q.policy.precision = precision;
    const auto policy = qjoule::quant::LayerPolicy::parse(q.policy, q.format_defaults);
    model = std::make_unique<EncoderClassifier>(base_params(), qjoule::model::quantized_linear_factory(policy));
  }
  return *model;
}

double model_ops_per_forward(const EncoderClassifier& m, int64_t batch) {
  double ops = 0.0;
  for (const auto& r : m.linear_reports()) {
    // Block Linears see every token; the head sees one token per sequence.
    const bool head = r.name == "pre_classifier" || r.name == "classifier";
    const double rows = head ? double(batch) : double(batch * kSeq);
    ops += 2.0 * rows * double(r.fp32_bytes / sizeof(float));  // out·(in+1) ≈ N·K (the bias is negligible)
  }
  const auto& c = m.config();
  ops += double(c.num_layers) * 4.0 * double(batch) * double(kSeq) * double(kSeq) * double(c.hidden_size);
  return ops;
}

std::string kernel_summary(const EncoderClassifier& m) {
  std::string out;
  for (const auto& [path, n] : m.kernel_path_counts()) out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", path, n);
  return out;
}

void bm_model(benchmark::State& state, const std::string& precision) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t batch = state.range(1);
  qjoule::kernels::set_num_threads(threads);
  const EncoderClassifier& m = model_for(precision);
  const auto ids = qjoule::model::synthetic_token_ids(qjoule::model::distilbert_base_spec(), batch, kSeq);
  const std::vector<int32_t> mask(ids.size(), 1);
  std::vector<float> logits(static_cast<std::size_t>(batch * m.config().num_labels));
  m.forward(ids.data(), mask.data(), batch, kSeq, logits.data());  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    m.forward(ids.data(), mask.data(), batch, kSeq, logits.data());
    benchmark::DoNotOptimize(logits.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double forwards = double(state.iterations());
  state.counters["seq/s"] = forwards * batch / seconds;
  state.counters["GOP/s"] = forwards * model_ops_per_forward(m, batch) / seconds / 1e9;
  state.SetLabel(kernel_summary(m));
}

// Keeps each run's mean wall time per iteration (every repetition), to print the median ratios against
// fp32 at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && r.iterations > 0)
        seconds_[r.benchmark_name()].push_back(r.GetAdjustedRealTime());
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios(const std::vector<std::string>& precisions, const std::vector<int>& thread_counts,
                    const std::vector<int64_t>& batches) const {
    for (int64_t batch : batches) {
      std::printf("\nspeed-up over fp32 in this run (batch %lld x %lld tokens; median of fp32 time / format time):\n",
                  static_cast<long long>(batch), static_cast<long long>(kSeq));
      for (int t : thread_counts) {
        const auto base = seconds_.find(name("fp32", t, batch));
        if (base == seconds_.end()) continue;
        for (const auto& p : precisions) {
          const auto it = seconds_.find(name(p, t, batch));
          if (it == seconds_.end()) continue;
          std::vector<double> ratios;
          for (double b : base->second)
            for (double f : it->second) ratios.push_back(b / f);
          std::sort(ratios.begin(), ratios.end());
          std::printf("  %-6s %d threads: %.2fx  (%zu x %zu runs, %.2f-%.2f)\n", p.c_str(), t, median(ratios),
                      base->second.size(), it->second.size(), ratios.front(), ratios.back());
        }
      }
    }
  }

 private:
  static std::string name(const std::string& precision, int threads, int64_t batch) {
    return fmt::format("model/{}/threads:{}/batch:{}/real_time", precision, threads, batch);
  }
  static double median(const std::vector<double>& sorted) {
    const std::size_t n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  std::map<std::string, std::vector<double>> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts = {2};
  if (hw > 2) thread_counts.push_back(hw);
  const std::vector<std::string> precisions = {"fp32", "bf16", "fp16", "int8", "w8", "int4", "nf4"};
  const std::vector<int64_t> batches = {8, 1};
  benchmark::AddCustomContext("model", "distilbert-base shapes (6 x 768, FFN 3072), random weights, 128 tokens");
  for (const auto& p : precisions) {
    auto* b = benchmark::RegisterBenchmark(("model/" + p).c_str(), bm_model, p);
    b->ArgNames({"threads", "batch"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (int t : thread_counts)
      for (int64_t batch : batches) b->Args({t, batch});
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios(precisions, thread_counts, batches);
  benchmark::Shutdown();
  return 0;
}

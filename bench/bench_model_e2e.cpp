// End to end: the whole DistilBERT-base-shaped classifier (random weights from a fixed seed, see
// qjoule/model/synthetic_encoder.h) at batch 8 × 128 tokens, in every format that runs for real,
// on 2 threads (and on every hardware thread when there are more). Counters:
//   seq/s     sequences per second over the timing loop's wall time;
//   GOP/s     the model's arithmetic per forward (2·M·N·K over every Linear, plus the attention
//             products 4·batch·seq²·hidden per block) over wall time;
// After the runs it prints each format's speed-up over fp32 at the same thread count, measured in
// this one run (the ratio is what the acceptance asks: int8 at least 2× fp32 at 2 threads).
// Short run: bench_model_e2e --benchmark_min_time=1 (see bench/README.md).
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
#include "qjoule/model/synthetic_encoder.h"

namespace {

using qjoule::model::EncoderClassifier;

constexpr int64_t kBatch = 8;
constexpr int64_t kSeq = 128;

const qjoule::model::EncoderParams& base_params() {
  static const auto params = qjoule::model::synthetic_encoder_params(qjoule::model::distilbert_base_spec());
  return params;
}

// One model at a time: building the next format frees the previous one (each holds up to 265 MB).
const EncoderClassifier& model_for(const std::string& precision) {
  static std::string current;
  static std::unique_ptr<EncoderClassifier> model;
  if (!model || current != precision) {
    model.reset();
    qjoule::model::QuantizationOptions q;
    q.policy.precision = precision;
    const auto policy = qjoule::quant::LayerPolicy::parse(q.policy);
    model = std::make_unique<EncoderClassifier>(base_params(),
                                                qjoule::model::quantized_linear_factory(policy, q.format_defaults));
    current = precision;
  }
  return *model;
}

double model_ops_per_forward(const EncoderClassifier& m) {
  double ops = 0.0;
  for (const auto& r : m.linear_reports()) {
    // Block Linears see every token; the head sees one token per sequence.
    const bool head = r.name == "pre_classifier" || r.name == "classifier";
    const double rows = head ? double(kBatch) : double(kBatch * kSeq);
    ops += 2.0 * rows * double(r.fp32_bytes / sizeof(float));  // out·(in+1) ≈ N·K (the bias is negligible)
  }
  const auto& c = m.config();
  ops += double(c.num_layers) * 4.0 * double(kBatch) * double(kSeq) * double(kSeq) * double(c.hidden_size);
  return ops;
}

std::string kernel_summary(const EncoderClassifier& m) {
  std::string out;
  for (const auto& [path, n] : m.kernel_path_counts()) out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", path, n);
  return out;
}

void bm_model(benchmark::State& state, const std::string& precision) {
  const int threads = static_cast<int>(state.range(0));
  qjoule::kernels::set_num_threads(threads);
  const EncoderClassifier& m = model_for(precision);
  const auto ids = qjoule::model::synthetic_token_ids(qjoule::model::distilbert_base_spec(), kBatch, kSeq);
  const std::vector<int32_t> mask(ids.size(), 1);
  std::vector<float> logits(static_cast<std::size_t>(kBatch * m.config().num_labels));
  m.forward(ids.data(), mask.data(), kBatch, kSeq, logits.data());  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    m.forward(ids.data(), mask.data(), kBatch, kSeq, logits.data());
    benchmark::DoNotOptimize(logits.data());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double forwards = double(state.iterations());
  state.counters["seq/s"] = forwards * kBatch / seconds;
  state.counters["GOP/s"] = forwards * model_ops_per_forward(m) / seconds / 1e9;
  state.SetLabel(kernel_summary(m));
}

// Keeps each run's mean wall time per iteration, to print the ratios against fp32 at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && r.iterations > 0)
        seconds_[r.benchmark_name()] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios(const std::vector<std::string>& precisions, const std::vector<int>& thread_counts) const {
    std::printf("\nspeed-up over fp32 in this run (batch %lld x %lld tokens):\n", static_cast<long long>(kBatch),
                static_cast<long long>(kSeq));
    for (int t : thread_counts) {
      const auto base = seconds_.find(fmt::format("model/fp32/threads:{}/real_time", t));
      if (base == seconds_.end()) continue;
      for (const auto& p : precisions) {
        const auto it = seconds_.find(fmt::format("model/{}/threads:{}/real_time", p, t));
        if (it == seconds_.end()) continue;
        std::printf("  %-6s %d threads: %.2fx\n", p.c_str(), t, base->second / it->second);
      }
    }
  }

 private:
  std::map<std::string, double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts = {2};
  if (hw > 2) thread_counts.push_back(hw);
  const std::vector<std::string> precisions = {"fp32", "bf16", "fp16", "int8", "w8", "int4", "nf4"};
  benchmark::AddCustomContext("model", "distilbert-base shapes (6 x 768, FFN 3072), random weights, batch 8 x 128");
  for (const auto& p : precisions) {
    auto* b = benchmark::RegisterBenchmark(("model/" + p).c_str(), bm_model, p);
    b->ArgNames({"threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
    for (int t : thread_counts) b->Arg(t);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios(precisions, thread_counts);
  benchmark::Shutdown();
  return 0;
}

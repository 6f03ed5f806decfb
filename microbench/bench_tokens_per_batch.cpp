// The cost per token of an encoder classifier as the tokens per batch grow (issue: throughput at large
// batches): for each format, batch × seq = 64, 256, 1024, 2048 … --max-tokens tokens (seq = min(128, tokens), batch the
// rest), it prints µs per token and the share of the forward spent inside the Linears (the GEMMs with
// their activation quantization and epilogues), on the DistilBERT-base-shaped synthetic model and, where
// ../shared has it, the SST-2 DistilBERT-mini checkpoint. A curve that bends up with the tokens is a
// per-token penalty of large batches; the GEMM share says whether the Linears or the rest (attention,
// LayerNorm, GELU, copies) pay it.
//   bench_tokens_per_batch                          # fp32,bf16,int8,w8,int4,nf4; 64 .. 8,192 tokens
//   bench_tokens_per_batch --max-tokens 16384 --precisions fp32,nf4 --threads 2
// --flatness: only b8, b32 and b64 × 128 tokens, measured in --rounds rounds that take turns between
// the three (a spell of noise on a shared host then slows every point of a round, not one point), each
// point's median over the rounds, and b32 / b64 over b8: the check of "no per-token penalty". Each
// point of a round is bracketed by the host-capacity probes (qjoule/limits/host_capacity.h) and measured
// again, up to twice, while the host delivered less than 80% of the highest FP32 rate seen (the peak
// measured at the start, or a probe since): a busy spell on a shared host then costs time, not a
// figure; the output says how many points were measured again and how many stayed busy.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/host_capacity.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"

namespace {

using Clock = std::chrono::steady_clock;
using qjoule::model::EncoderClassifier;
using qjoule::model::EncoderParams;

// A Linear that adds the wall time of each forward to a counter (forwards come from the calling thread;
// the Linear parallelizes inside).
class TimedLinear final : public qjoule::kernels::Linear {
 public:
  TimedLinear(std::unique_ptr<Linear> inner, std::atomic<int64_t>& ns) : inner_(std::move(inner)), ns_(ns) {}
  void forward(const float* x, int64_t m, float* y) const override {
    const auto start = Clock::now();
    inner_->forward(x, m, y);
    ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  std::string format() const override { return inner_->format(); }
  std::string kernel_path() const override { return inner_->kernel_path(); }
  std::size_t bytes_held() const override { return inner_->bytes_held(); }

 private:
  std::unique_ptr<Linear> inner_;
  std::atomic<int64_t>& ns_;
};

struct Model {
  std::string name;
  EncoderParams params;
};

std::vector<Model> models() {
  std::vector<Model> out;
  out.push_back({"DistilBERT-base shapes (synthetic)",
                 qjoule::model::synthetic_encoder_params(qjoule::model::distilbert_base_spec())});
  const std::filesystem::path sst2 = std::filesystem::path(QJOULE_SHARED_DIR) / "data/models/sst2-distilbert-mini";
  if (std::filesystem::exists(sst2 / "config.json")) {
    const auto ck = qjoule::io::Checkpoint::open(sst2);
    out.push_back({"SST-2 DistilBERT-mini (../shared)",
                   qjoule::model::load_encoder_params(ck, qjoule::model::load_encoder_config(sst2, ck))});
  } else {
    std::printf("(../shared absent: the SST-2 DistilBERT-mini curve is skipped)\n");
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"µs per token and the Linears' share of the time as tokens per batch grow, per format"};
  std::string precisions = "fp32,bf16,int8,w8,int4,nf4";
  int64_t max_tokens = 8192;
  int threads = 0;
  double min_seconds = 0.5;
  app.add_option("--precisions", precisions, "Formats, comma-separated")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "Largest batch × seq (64, 256, 1024, 2048, ... up to it)")
      ->capture_default_str();
  app.add_option("--threads", threads, "Threads (default: all cores)");
  app.add_option("--min-time", min_seconds, "Seconds of forwards per point (at least one forward)")
      ->capture_default_str();
  bool flatness = false;
  int rounds = 5;
  app.add_flag("--flatness", flatness, "b8, b32, b64 x 128 only, interleaved in rounds; ratios to b8");
  app.add_option("--rounds", rounds, "With --flatness: rounds (each point's median is printed)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) qjoule::kernels::set_num_threads(threads);

  std::vector<std::string> formats;
  for (std::size_t at = 0; at <= precisions.size();) {
    const auto comma = std::min(precisions.find(',', at), precisions.size());
    if (comma > at) formats.push_back(precisions.substr(at, comma - at));
    at = comma + 1;
  }
  for (const auto& model : models()) {
    std::printf("\n%s, %d threads: µs per token (Linears' share of the forward)\n", model.name.c_str(),
                qjoule::kernels::num_threads());
    std::printf("%-10s", "tokens");
    for (const auto& f : formats) std::printf(" %16s", f.c_str());
    std::printf("\n");
    std::vector<std::unique_ptr<EncoderClassifier>> built;
    std::vector<std::unique_ptr<std::atomic<int64_t>>> linear_ns;
    for (const auto& f : formats) {
      qjoule::model::QuantizationOptions q;
      q.policy.precision = f;
      const auto policy = qjoule::quant::LayerPolicy::parse(q.policy, q.format_defaults);
      auto inner = qjoule::model::quantized_linear_factory(policy);
      linear_ns.push_back(std::make_unique<std::atomic<int64_t>>(0));
      auto& ns = *linear_ns.back();
      built.push_back(std::make_unique<EncoderClassifier>(
          model.params, [inner, &ns](const qjoule::model::LinearParams& p, bool in_block) {
            return std::unique_ptr<qjoule::kernels::Linear>(std::make_unique<TimedLinear>(inner(p, in_block), ns));
          }));
    }
    // µs per token of `batch` × `seq` in format i over at least `min_s` seconds, and the Linears' share.
    const auto time_point = [&](std::size_t i, int64_t batch, int64_t seq, double min_s) {
      const EncoderClassifier& m = *built[i];
      const auto ids =
          qjoule::model::synthetic_token_ids(qjoule::model::SyntheticEncoderSpec{.vocab_size = m.config().vocab_size},
                                             static_cast<std::size_t>(batch), static_cast<std::size_t>(seq));
      const std::vector<int32_t> mask(ids.size(), 1);
      std::vector<float> logits(static_cast<std::size_t>(batch * m.config().num_labels));
      m.forward(ids.data(), mask.data(), batch, seq, logits.data());  // warm-up (buffers, primitives)
      *linear_ns[i] = 0;
      int64_t forwards = 0;
      const auto start = Clock::now();
      double seconds = 0.0;
      do {
        m.forward(ids.data(), mask.data(), batch, seq, logits.data());
        ++forwards;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
      } while (seconds < min_s);
      return std::pair{seconds * 1e6 / double(forwards * batch * seq), double(linear_ns[i]->load()) * 1e-9 / seconds};
    };
    if (flatness) {
      const int64_t batches[] = {8, 32, 64};
      std::printf("%-10s", "");
      std::printf("   (median of %d interleaved rounds; b32/b8, b64/b8)\n", rounds);
      std::vector<std::array<std::vector<double>, 3>> us(formats.size());
      const int threads_now = qjoule::kernels::num_threads();
      double reference = qjoule::limits::measured_peak(threads_now).fp32_gflops.value_or(0.0);
      int remeasured = 0, stayed_busy = 0;
      const auto quiet_point = [&](std::size_t i, int64_t batch) {
        for (int attempt = 0;; ++attempt) {
          const qjoule::limits::HostCapacityProbe probe(threads_now);
          const double us_per_token = time_point(i, batch, 128, min_seconds).first;
          const auto measured = probe.finish();
          for (const auto& v : {measured.fp32_gflops_before, measured.fp32_gflops_after})
            if (v) reference = std::max(reference, *v);
          const auto share = qjoule::limits::delivered_fraction(
              qjoule::limits::compared_with(measured, reference > 0.0 ? std::optional(reference) : std::nullopt));
          if (!share || *share >= qjoule::limits::kBusyHostFraction) return us_per_token;
          if (attempt == 2) {
            ++stayed_busy;
            return us_per_token;
          }
          ++remeasured;
        }
      };
      for (int r = 0; r < rounds; ++r)
        for (std::size_t i = 0; i < formats.size(); ++i)
          for (int p = 0; p < 3; ++p) us[i][p].push_back(quiet_point(i, batches[p]));
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::array<std::array<double, 3>, 64> med{};
      for (int p = 0; p < 3; ++p) {
        std::printf("%-10s", fmt::format("b{}x128", batches[p]).c_str());
        for (std::size_t i = 0; i < formats.size() && i < med.size(); ++i) {
          med[i][p] = median(us[i][p]);
          std::printf(" %16s", fmt::format("{:.1f}", med[i][p]).c_str());
        }
        std::printf("\n");
      }
      for (int p = 1; p < 3; ++p) {
        std::printf("%-10s", fmt::format("b{}/b8", batches[p]).c_str());
        for (std::size_t i = 0; i < formats.size() && i < med.size(); ++i)
          std::printf(" %16s", fmt::format("{:+.1f}%", 100.0 * (med[i][p] / med[i][0] - 1.0)).c_str());
        std::printf("\n");
      }
      std::printf("busy host (below %.0f%% of %.0f GFLOP/s FP32): %d points measured again, %d of %zu stayed busy\n",
                  100.0 * qjoule::limits::kBusyHostFraction, reference, remeasured, stayed_busy,
                  static_cast<std::size_t>(rounds) * formats.size() * 3);
      continue;
    }
    for (int64_t tokens = 64; tokens <= max_tokens; tokens *= tokens < 1024 ? 4 : 2) {
      const int64_t seq = std::min<int64_t>(128, tokens), batch = tokens / seq;
      std::printf("%-10s", fmt::format("{} ({}x{})", tokens, batch, seq).c_str());
      for (std::size_t i = 0; i < formats.size(); ++i) {
        const auto [us_per_token, share] = time_point(i, batch, seq, min_seconds);
        std::printf(" %16s", fmt::format("{:.1f} ({:.0f}%)", us_per_token, 100.0 * share).c_str());
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  return 0;
}

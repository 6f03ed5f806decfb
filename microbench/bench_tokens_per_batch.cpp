// The cost per token of an encoder classifier as the tokens per batch grow (issue: throughput at large
// batches): for each format, batch × seq = 64, 256, 1024, 2048 … --max-tokens tokens (seq = min(128, tokens), batch the
// rest), it prints µs per token and the share of the forward spent inside the Linears (the GEMMs with
// their activation quantization and epilogues), on the DistilBERT-base-shaped synthetic model and, where
// ../shared has it, the SST-2 DistilBERT-mini checkpoint. A curve that bends up with the tokens is a
// per-token penalty of large batches; the GEMM share says whether the Linears or the rest (attention,
// LayerNorm, GELU, copies) pay it.
//   bench_tokens_per_batch                          # fp32,bf16,int8,w8,int4,nf4; 64 .. 8,192 tokens
//   bench_tokens_per_batch --max-tokens 16384 --precisions fp32,nf4 --threads 2
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/synthetic_encoder.h"

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
      const auto policy = qjoule::quant::LayerPolicy::parse(q.policy);
      auto inner = qjoule::model::quantized_linear_factory(policy, q.format_defaults);
      linear_ns.push_back(std::make_unique<std::atomic<int64_t>>(0));
      auto& ns = *linear_ns.back();
      built.push_back(std::make_unique<EncoderClassifier>(
          model.params, [inner, &ns](const qjoule::model::LinearParams& p, bool in_block) {
            return std::unique_ptr<qjoule::kernels::Linear>(std::make_unique<TimedLinear>(inner(p, in_block), ns));
          }));
    }
    for (int64_t tokens = 64; tokens <= max_tokens; tokens *= tokens < 1024 ? 4 : 2) {
      const int64_t seq = std::min<int64_t>(128, tokens), batch = tokens / seq;
      std::printf("%-10s", fmt::format("{} ({}x{})", tokens, batch, seq).c_str());
      for (std::size_t i = 0; i < formats.size(); ++i) {
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
        } while (seconds < min_seconds);
        const double us_per_token = seconds * 1e6 / double(forwards * tokens);
        const double share = double(linear_ns[i]->load()) * 1e-9 / seconds;
        std::printf(" %16s", fmt::format("{:.1f} ({:.0f}%)", us_per_token, 100.0 * share).c_str());
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
  return 0;
}

#include "qjoule/bench/memory_prediction.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <map>
#include <tuple>

#include "qjoule/bench/bench_runner.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"
#include "bench/bench_inputs.h"
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::bench {
namespace {

// Per-thread scratch of the weight-only kernels (dequantized panels) and oneDNN's, with margin.
constexpr std::uint64_t kScratchPerThreadBytes = std::uint64_t{2} << 20;

std::uint64_t float_bytes(std::size_t n) { return static_cast<std::uint64_t>(n) * sizeof(float); }
std::uint64_t fp32_of(const model::LinearParams& p) {
  return float_bytes(static_cast<std::size_t>(p.out_features * p.in_features));
}

// The bytes one Linear of `p`'s shape holds in the format `policy` gives it, built once per kind from
// synthetic weights (small, varied, finite: any format quantizes them).
class LinearBytes {
 public:
  explicit LinearBytes(const quant::Precision& precision) {
    // A calibrated precision holds round-to-nearest's layout (its codes come from calibration).
    const auto& spec = precision.spec();
    policy_ = quant::LayerPolicy::uniform(spec && quant::needs_calibration(*spec)
                                              ? quant::Precision(quant::to_string(quant::round_to_nearest(*spec)))
                                              : precision);
    factory_ = model::quantized_linear_factory(*policy_);
  }
  // What one Linear holds: its bytes, and its weights as plain host rows (4: FP32, 2: BF16, 0: held
  // otherwise; kernels::Linear::host_weight_rows, what a tied model's embeddings can read).
  struct Held {
    std::uint64_t bytes;
    int row_bytes;
  };
  // head_stored: a language model's head as its checkpoint stores it (model::LinearParams::head_stored).
  Held operator()(const std::string& name, int64_t out_features, int64_t in_features, bool bias, bool in_block,
                  std::optional<quant::Format> head_stored = std::nullopt) {
    const auto key =
        std::make_tuple(policy_->resolve(name, in_block, head_stored).format, out_features, in_features, bias);
    auto it = built_.find(key);
    if (it == built_.end()) {
      model::LinearParams sample;
      sample.name = name;
      sample.out_features = out_features;
      sample.in_features = in_features;
      sample.head_stored = head_stored;
      sample.weight.resize(static_cast<std::size_t>(out_features * in_features));
      for (std::size_t i = 0; i < sample.weight.size(); ++i)
        sample.weight[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 2001u) - 1000) * 1e-4f;
      if (bias) sample.bias.assign(static_cast<std::size_t>(out_features), 0.0f);
      const auto linear = factory_(sample, in_block);
      // A prefill of many rows decodes a weight within kWholePanelMaxBytes into one FP32 panel, kept.
      const std::uint64_t whole = float_bytes(static_cast<std::size_t>(out_features * in_features));
      if (linear->kernel_path().find("f32_panel") != std::string::npos &&
          whole <= static_cast<std::uint64_t>(kernels::avx512::kWholePanelMaxBytes))
        whole_panel_bytes_ = std::max(whole_panel_bytes_, whole);
      it = built_.emplace(key, Held{linear->bytes_held(), linear->host_weight_rows().element_bytes}).first;
    }
    return it->second;
  }
  // The largest whole FP32 panel a prefill of kWholePanelMinRows rows or more keeps (0: none).
  std::uint64_t whole_panel_bytes() const { return whole_panel_bytes_; }

 private:
  std::optional<quant::LayerPolicy> policy_;
  model::LinearFactory factory_;
  std::map<std::tuple<std::string, int64_t, int64_t, bool>, Held> built_;
  std::uint64_t whole_panel_bytes_ = 0;
};

// An encoder classifier's run (bench_runner_encoder.cpp): the sweep holds the model's FP32 parameters
// for its every run; building copies them (the Linears' FP32 copies are dropped one by one as each is
// built, Q/K/V fused from a copy of their three weights); the run then holds the built model, one CPU
// pass's activations (EncoderClassifier::sequences_per_pass) and per-thread scratch.
MemoryPrediction predict_encoder_peak_memory(const RunConfig& c, std::uint64_t baseline_bytes) {
  MemoryPrediction out;
  out.baseline_bytes = baseline_bytes;
  model::EncoderConfig cfg;
  if (detail::is_synthetic(c.model)) {
    cfg = model::synthetic_encoder_config(model::distilbert_base_spec());
  } else {
    cfg = model::load_encoder_config(c.model, io::Checkpoint::open(c.model));
    if (cfg.quantization) {
      out.unavailable = "predicted for unquantized encoders only (this checkpoint is pre-quantized)";
      return out;
    }
  }
  const auto h = static_cast<std::size_t>(cfg.hidden_size), f = static_cast<std::size_t>(cfg.intermediate_size);
  const auto layers = static_cast<std::size_t>(cfg.num_layers), labels = static_cast<std::size_t>(cfg.num_labels);
  // FP32 parameters as EncoderParams holds them.
  const std::size_t embedding_floats = static_cast<std::size_t>(cfg.vocab_size) * h +
                                       static_cast<std::size_t>(cfg.max_positions) * h +
                                       static_cast<std::size_t>(cfg.type_vocab_size) * h + 2 * h;
  const std::size_t layer_floats = 4 * (h * h + h) + (f * h + f) + (h * f + h) + 4 * h;
  const std::size_t params_floats = embedding_floats + layers * layer_floats + (h * h + h) + (labels * h + labels);
  LinearBytes bytes(c.precision);
  const bool bert = cfg.arch == model::EncoderArch::Bert;
  std::uint64_t linears = 0;
  for (std::size_t i = 0; i < layers; ++i) {
    const std::string l =
        bert ? fmt::format("bert.encoder.layer.{}.", i) : fmt::format("distilbert.transformer.layer.{}.", i);
    const auto H = cfg.hidden_size, F = cfg.intermediate_size;
    for (const char* part : {"q", "k", "v", "o"})
      linears += bytes(l + (bert ? std::string("attention.self.") + part : std::string("attention.") + part + "_lin"),
                       H, H, true, true)
                     .bytes;
    linears += bytes(l + (bert ? "intermediate.dense" : "ffn.lin1"), F, H, true, true).bytes;
    linears += bytes(l + (bert ? "output.dense" : "ffn.lin2"), H, F, true, true).bytes;
  }
  linears += bytes(bert ? "bert.pooler.dense" : "pre_classifier", cfg.hidden_size, cfg.hidden_size, true, false).bytes;
  linears += bytes("classifier", cfg.num_labels, cfg.hidden_size, true, false).bytes;
  // The built model: the Linears in their formats, embeddings (one token-type row) and norms in FP32.
  const std::size_t kept_floats = embedding_floats - static_cast<std::size_t>(cfg.type_vocab_size) * h +
                                  (cfg.type_vocab_size > 0 ? h : 0) + layers * 4 * h;
  out.model_bytes = linears + float_bytes(kept_floats);
  // Held by the sweep for all its runs (not part of the model): the FP32 parameters.
  const std::uint64_t params = float_bytes(params_floats);
  // Building: the copy of the parameters, and Q/K/V's fused copy.
  const std::uint64_t build = params + float_bytes(3 * h * h + 3 * h);
  // Running: one pass's ids, mask and activations (x, q/k/v, context, a temporary, the FFN, attention
  // scores of one head per thread), the logits, per-thread scratch.
  const auto threads = static_cast<std::uint64_t>(std::max(1, c.threads));
  const int64_t per_pass =
      std::clamp<int64_t>(model::cpu_tokens_per_pass() / static_cast<int64_t>(c.seq), 1, static_cast<int64_t>(c.batch));
  const std::size_t rows = static_cast<std::size_t>(per_pass) * c.seq;
  const std::uint64_t run =
      float_bytes(rows * (6 * h + f) + 2 * rows + 2 * static_cast<std::size_t>(per_pass) * h) +
      threads * (float_bytes(c.seq * c.seq) + kScratchPerThreadBytes) +
      (static_cast<int64_t>(rows) >= kernels::avx512::kWholePanelMinRows ? bytes.whole_panel_bytes() : 0);
  out.build_transient_bytes = build > out.model_bytes + run ? build - out.model_bytes - run : 0;
  out.held_bytes = params;
  out.run_bytes = run;
  return out;
}

}  // namespace

MemoryPrediction predict_peak_memory(const RunConfig& c, std::size_t decode_tokens, std::uint64_t baseline_bytes) {
  if (!is_decoder_model(c.model)) return predict_encoder_peak_memory(c, baseline_bytes);
  MemoryPrediction out;
  out.baseline_bytes = baseline_bytes;
  const auto ck = io::Checkpoint::open(c.model);
  const auto cfg = model::load_decoder_config(c.model, ck);
  // Deferred: the Linears' names and shapes without their weights; embeddings and norms as the run holds them.
  const auto params = model::load_decoder_params(ck, cfg, /*defer_linears=*/true);

  LinearBytes bytes(c.precision);
  auto add_linear = [&](const model::LinearParams& p, bool in_block) -> LinearBytes::Held {
    if (p.out_features == 0) return {0, 0};
    const auto held = bytes(p.name, p.out_features, p.in_features, model::with_bias(p), in_block, p.head_stored);
    out.model_bytes += held.bytes;
    // While this Linear is built: its FP32 weights, the stored tensor's mapped pages (a GPT-2 Conv1D
    // weight also its transposed copy) and, as it is built, what it will hold.
    const std::uint64_t fp32 = fp32_of(p);
    const std::string tensor = p.name == "lm_head" && cfg.tie_word_embeddings ? "" : p.name + ".weight";
    const std::uint64_t stored = !tensor.empty() && ck.contains(tensor) ? ck.at(tensor).nbytes : fp32_of(p);
    const std::uint64_t transient = fp32 * (cfg.arch == model::DecoderArch::Gpt2 && in_block ? 2 : 1) + stored;
    out.build_transient_bytes = std::max(out.build_transient_bytes, transient);
    return held;
  };
  for (const auto& l : params.layers) {
    for (const auto* p : {&l.qkv, &l.q, &l.k, &l.v, &l.o, &l.gate_up, &l.gate, &l.up, &l.down}) add_linear(*p, true);
    add_linear(l.router, false);  // a mixture's: FP32 unless the policy names it
    for (const auto& e : l.experts)
      for (const auto* p : {&e.gate, &e.up, &e.down}) add_linear(*p, true);
  }
  const int head_rows = add_linear(params.lm_head, false).row_bytes;
  // A tied model's embeddings read the head's rows where they are the stored values (model/tied_embeddings.h):
  // BF16 rows of BF16-stored embeddings, FP32 rows of an unscaled table.
  const bool shared = cfg.tie_word_embeddings && ((head_rows == 2 && !params.token_embeddings_bf16.empty()) ||
                                                  (head_rows == 4 && cfg.embedding_scale == 1.0f));
  std::size_t floats = (shared ? 0 : params.token_embeddings.size()) + params.position_embeddings.size() +
                       params.final_norm.gamma.size() + params.final_norm.beta.size();
  for (const auto& l : params.layers)
    floats += l.attn_norm.gamma.size() + l.attn_norm.beta.size() + l.mlp_norm.gamma.size() + l.mlp_norm.beta.size() +
              l.q_norm.gamma.size() + l.k_norm.gamma.size() + l.attn_post_norm.gamma.size() +
              l.mlp_post_norm.gamma.size();
  out.model_bytes += float_bytes(floats) + (shared ? 0 : params.token_embeddings_bf16.size() * sizeof(uint16_t));

  // The run: KV cache, one prefill's activations (hidden states, Q/K/V, context, the MLP's two FFN-wide
  // buffers, attention scores, the last token's logits), the fidelity logits, per-thread scratch.
  const auto n = static_cast<std::size_t>(c.seq);
  const auto positions = n + decode_tokens;
  const auto h = static_cast<std::size_t>(cfg.hidden_size),
             f = static_cast<std::size_t>(std::max(cfg.intermediate_size, cfg.moe.expert_intermediate_size));
  const auto qd = static_cast<std::size_t>(cfg.num_heads * cfg.head_dim);
  const auto kvd = static_cast<std::size_t>(cfg.num_kv_heads * cfg.head_dim);
  const auto vocab = static_cast<std::size_t>(cfg.vocab_size);
  out.run_bytes =
      float_bytes(2 * static_cast<std::size_t>(cfg.num_layers) * positions * kvd) +
      float_bytes(n * (4 * h + 2 * qd + 2 * kvd + 2 * f)) +
      // a mixture's router logits and its input, gathered and output rows
      float_bytes(cfg.moe.num_experts > 0 ? n * (static_cast<std::size_t>(cfg.moe.num_experts) + 3 * h) : 0) +
      float_bytes(static_cast<std::size_t>(cfg.num_heads) * n * n) +
      float_bytes(2 * kDecoderFidelityPrompts * vocab + vocab) +
      static_cast<std::uint64_t>(std::max(1, c.threads)) * kScratchPerThreadBytes;
  return out;
}

}  // namespace qjoule::bench

#include "qjoule/bench/memory_prediction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "qjoule/bench/bench_runner.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_params.h"
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

}  // namespace

MemoryPrediction predict_peak_memory(const RunConfig& c, std::size_t decode_tokens, std::uint64_t baseline_bytes) {
  MemoryPrediction out;
  if (!is_decoder_model(c.model)) {
    out.unavailable = "predicted for decoder models only (an encoder run also holds its FP32 parameters)";
    return out;
  }
  out.baseline_bytes = baseline_bytes;
  const auto ck = io::Checkpoint::open(c.model);
  const auto cfg = model::load_decoder_config(c.model, ck);
  // Deferred: the Linears' names and shapes without their weights; embeddings and norms as the run holds them.
  const auto params = model::load_decoder_params(ck, cfg, /*defer_linears=*/true);

  quant::LayerPolicyOptions po;
  po.precision = c.precision;
  const auto policy = quant::LayerPolicy::parse(po);
  const auto factory = model::quantized_linear_factory(policy, {});
  std::map<std::tuple<std::string, int64_t, int64_t, bool>, std::uint64_t> built;  // one Linear per kind
  auto add_linear = [&](const model::LinearParams& p, bool in_block) {
    if (p.out_features == 0) return;
    const bool bias = model::with_bias(p);
    const auto key = std::make_tuple(policy.resolve(p.name, in_block).format, p.out_features, p.in_features, bias);
    auto it = built.find(key);
    if (it == built.end()) {
      model::LinearParams sample;
      sample.name = p.name;
      sample.out_features = p.out_features;
      sample.in_features = p.in_features;
      sample.weight.resize(static_cast<std::size_t>(p.out_features * p.in_features));
      for (std::size_t i = 0; i < sample.weight.size(); ++i)  // small, varied, finite: any format quantizes it
        sample.weight[i] = static_cast<float>(static_cast<int>((i * 2654435761u) % 2001u) - 1000) * 1e-4f;
      if (bias) sample.bias.assign(static_cast<std::size_t>(p.out_features), 0.0f);
      it = built.emplace(key, factory(sample, in_block)->bytes_held()).first;
    }
    out.model_bytes += it->second;
    // While this Linear is built: its FP32 weights, the stored tensor's mapped pages (a GPT-2 Conv1D
    // weight also its transposed copy) and, as it is built, what it will hold.
    const std::uint64_t fp32 = fp32_of(p);
    const std::string tensor = p.name == "lm_head" && cfg.tie_word_embeddings ? "" : p.name + ".weight";
    const std::uint64_t stored = !tensor.empty() && ck.contains(tensor) ? ck.at(tensor).nbytes : fp32_of(p);
    const std::uint64_t transient = fp32 * (cfg.arch == model::DecoderArch::Gpt2 && in_block ? 2 : 1) + stored;
    out.build_transient_bytes = std::max(out.build_transient_bytes, transient);
  };
  for (const auto& l : params.layers) {
    for (const auto* p : {&l.qkv, &l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down}) add_linear(*p, true);
  }
  add_linear(params.lm_head, false);
  std::size_t floats = params.token_embeddings.size() + params.position_embeddings.size() +
                       params.final_norm.gamma.size() + params.final_norm.beta.size();
  for (const auto& l : params.layers)
    floats += l.attn_norm.gamma.size() + l.attn_norm.beta.size() + l.mlp_norm.gamma.size() + l.mlp_norm.beta.size();
  out.model_bytes += float_bytes(floats);

  // The run: KV cache, one prefill's activations (hidden states, Q/K/V, context, the MLP's two FFN-wide
  // buffers, attention scores, the last token's logits), the fidelity logits, per-thread scratch.
  const auto n = static_cast<std::size_t>(c.seq);
  const auto positions = n + decode_tokens;
  const auto h = static_cast<std::size_t>(cfg.hidden_size), f = static_cast<std::size_t>(cfg.intermediate_size);
  const auto qd = static_cast<std::size_t>(cfg.num_heads * cfg.head_dim);
  const auto kvd = static_cast<std::size_t>(cfg.num_kv_heads * cfg.head_dim);
  const auto vocab = static_cast<std::size_t>(cfg.vocab_size);
  out.run_bytes = float_bytes(2 * static_cast<std::size_t>(cfg.num_layers) * positions * kvd) +
                  float_bytes(n * (4 * h + 2 * qd + 2 * kvd + 2 * f)) +
                  float_bytes(static_cast<std::size_t>(cfg.num_heads) * n * n) +
                  float_bytes(2 * kDecoderFidelityPrompts * vocab + vocab) +
                  static_cast<std::uint64_t>(std::max(1, c.threads)) * kScratchPerThreadBytes;
  return out;
}

}  // namespace qjoule::bench

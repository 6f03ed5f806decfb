#include "qjoule/model/synthetic/synthetic_decoder.h"

#include <functional>

#include <fmt/format.h>

#include "model/synthetic/synthetic_rng.h"
#include "qjoule/error.h"

namespace qjoule::model {
namespace {

using detail::SyntheticRng;

LinearParams linear_without_bias(SyntheticRng& rng, std::string name, int64_t out, int64_t in) {
  return detail::synthetic_linear(rng, std::move(name), out, in, false);  // Llama's Linears have no bias
}

LayerNormParams rms_norm(std::string name, int64_t h) {
  LayerNormParams n;
  n.name = std::move(name);
  n.gamma.assign(static_cast<std::size_t>(h), 1.0f);
  return n;
}

// A Linear's shape and name only: load_experts_lazily fills it when the model builds it.
LinearParams deferred_linear(std::string name, int64_t out, int64_t in) {
  LinearParams p;
  p.name = std::move(name);
  p.out_features = out;
  p.in_features = in;
  return p;
}

// Each expert's weights from their own stream (the spec's seed and the Linear's name), so that drawing them in any
// order, or again, gives the same weights.
std::function<void(LinearParams&)> load_experts_lazily(std::uint64_t seed) {
  return [seed](LinearParams& p) {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
    for (const char ch : p.name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    SyntheticRng rng(seed ^ h);
    p.weight = detail::synthetic_normal_vector(rng, p.out_features * p.in_features, 0.02f);
  };
}

}  // namespace

SyntheticDecoderSpec tinyllama_shapes_spec(int64_t vocab) {
  SyntheticDecoderSpec spec;
  spec.vocab_size = vocab;
  return spec;
}

SyntheticDecoderSpec mixtral_shapes_spec(int64_t vocab) {
  SyntheticDecoderSpec spec;
  spec.name = "mixtral-shapes";
  spec.vocab_size = vocab;
  spec.num_layers = 16;
  spec.num_kv_heads = 8;
  spec.num_experts = 8;
  spec.experts_per_token = 2;
  return spec;
}

DecoderParams synthetic_decoder_params(const SyntheticDecoderSpec& spec) {
  if (spec.vocab_size <= 0 || spec.hidden_size <= 0 || spec.num_layers <= 0 || spec.num_heads <= 0 ||
      spec.num_kv_heads <= 0 || spec.intermediate_size <= 0 || spec.max_positions <= 1) {
    fail(
        "synthetic decoder '{}': every size must be positive, got vocab {}, hidden {}, layers {}, heads {}, KV heads "
        "{}, FFN {}, positions {}",
        spec.name, spec.vocab_size, spec.hidden_size, spec.num_layers, spec.num_heads, spec.num_kv_heads,
        spec.intermediate_size, spec.max_positions);
  }
  if (spec.num_experts < 0 ||
      (spec.num_experts > 0 && (spec.experts_per_token <= 0 || spec.experts_per_token > spec.num_experts)))
    fail("synthetic decoder '{}': {} experts, top-{}; expected top-k in 1 .. experts", spec.name, spec.num_experts,
         spec.experts_per_token);
  if (spec.hidden_size % spec.num_heads != 0 || spec.num_heads % spec.num_kv_heads != 0) {
    fail("synthetic decoder '{}': hidden size {} must be a multiple of {} heads, and heads a multiple of {} KV heads",
         spec.name, spec.hidden_size, spec.num_heads, spec.num_kv_heads);
  }
  DecoderParams p;
  DecoderConfig& c = p.config;
  c.arch = DecoderArch::Llama;
  c.model_type = "llama";
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = spec.vocab_size;
  c.hidden_size = spec.hidden_size;
  c.num_layers = spec.num_layers;
  c.num_heads = spec.num_heads;
  c.num_kv_heads = spec.num_kv_heads;
  c.head_dim = spec.hidden_size / spec.num_heads;
  c.intermediate_size = spec.intermediate_size;
  c.max_positions = spec.max_positions;
  c.activation = "silu";
  c.prefix = "model.";
  c.lm_head_tensor = "lm_head.weight";
  const bool moe = spec.num_experts > 0;
  if (moe) {
    c.arch = DecoderArch::Mixtral;
    c.model_type = "mixtral";
    c.architecture = "MixtralForCausalLM";
    c.moe.num_experts = spec.num_experts;
    c.moe.experts_per_token = spec.experts_per_token;
    c.moe.expert_intermediate_size = spec.intermediate_size;
    c.moe.sparse_layer.assign(static_cast<std::size_t>(spec.num_layers), true);
    p.load_linear = load_experts_lazily(spec.seed);
  }

  SyntheticRng rng(spec.seed);
  const int64_t h = spec.hidden_size, f = spec.intermediate_size;
  p.token_embeddings = detail::synthetic_normal_vector(rng, spec.vocab_size * h, 0.02f);
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string l = fmt::format("model.layers.{}.", i);
    DecoderLayerParams layer;
    layer.attn_norm = rms_norm(l + "input_layernorm", h);
    layer.mlp_norm = rms_norm(l + "post_attention_layernorm", h);
    layer.q = linear_without_bias(rng, l + "self_attn.q_proj", c.q_dim(), h);
    layer.k = linear_without_bias(rng, l + "self_attn.k_proj", c.kv_dim(), h);
    layer.v = linear_without_bias(rng, l + "self_attn.v_proj", c.kv_dim(), h);
    layer.o = linear_without_bias(rng, l + "self_attn.o_proj", h, c.q_dim());
    if (moe) {
      layer.router = linear_without_bias(rng, l + "block_sparse_moe.gate", spec.num_experts, h);
      for (int64_t e = 0; e < spec.num_experts; ++e) {
        const std::string x = fmt::format("{}block_sparse_moe.experts.{}.", l, e);
        layer.experts.push_back(
            {deferred_linear(x + "w1", f, h), deferred_linear(x + "w3", f, h), deferred_linear(x + "w2", h, f)});
      }
    } else {
      layer.gate = linear_without_bias(rng, l + "mlp.gate_proj", f, h);
      layer.up = linear_without_bias(rng, l + "mlp.up_proj", f, h);
      layer.down = linear_without_bias(rng, l + "mlp.down_proj", h, f);
    }
    p.layers.push_back(std::move(layer));
  }
  p.final_norm = rms_norm("model.norm", h);
  p.lm_head = linear_without_bias(rng, "lm_head", spec.vocab_size, h);
  p.lm_head.head_stored = quant::Format::bf16;  // as the BF16 checkpoints of such models store it
  return p;
}

}  // namespace qjoule::model

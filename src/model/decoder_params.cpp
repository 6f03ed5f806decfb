#include "qjoule/model/decoder_params.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"

namespace qjoule::model {
namespace {

class DecoderParamReader {
 public:
  DecoderParamReader(const io::Checkpoint& ck, const DecoderConfig& cfg) : ck_(ck), cfg_(cfg) {}

  std::vector<float> read(const std::string& name, const std::vector<int64_t>& expected) const {
    const auto& t = ck_.at(name);
    if (t.shape != expected)
      fail("{}: tensor '{}' has shape {}, expected [{}] from config.json ({}: hidden {}, heads {}/{} of {}, "
           "intermediate {}, vocab {})",
           t.file.string(), name, t.shape_string(), fmt::join(expected, ", "), cfg_.architecture, cfg_.hidden_size,
           cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim, cfg_.intermediate_size, cfg_.vocab_size);
    return ck_.to_f32(name);
  }

  // nn.Linear: weight [out, in].
  LinearParams linear(const std::string& name, int64_t out, int64_t in, bool bias) const {
    LinearParams p;
    p.name = name;
    p.out_features = out;
    p.in_features = in;
    p.weight = read(name + ".weight", {out, in});
    if (bias) p.bias = read(name + ".bias", {out});
    return p;
  }

  // GPT-2's Conv1D: weight stored [in, out], transposed here to [out, in].
  LinearParams conv1d(const std::string& name, int64_t out, int64_t in) const {
    LinearParams p;
    p.name = name;
    p.out_features = out;
    p.in_features = in;
    const auto stored = read(name + ".weight", {in, out});
    p.weight.resize(stored.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) p.weight[static_cast<size_t>(o * in + i)] = stored[static_cast<size_t>(i * out + o)];
    p.bias = read(name + ".bias", {out});
    return p;
  }

  LayerNormParams norm(const std::string& name, bool beta) const {
    LayerNormParams n;
    n.name = name;
    n.gamma = read(name + ".weight", {cfg_.hidden_size});
    if (beta) n.beta = read(name + ".bias", {cfg_.hidden_size});
    return n;
  }

 private:
  const io::Checkpoint& ck_;
  const DecoderConfig& cfg_;
};

void load_llama_layers(const DecoderParamReader& r, const DecoderConfig& c, DecoderParams& out) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = fmt::format("model.layers.{}.", i);
    DecoderLayerParams layer;
    layer.attn_norm = r.norm(l + "input_layernorm", false);
    layer.mlp_norm = r.norm(l + "post_attention_layernorm", false);
    layer.q = r.linear(l + "self_attn.q_proj", c.q_dim(), h, c.qkv_bias);
    layer.k = r.linear(l + "self_attn.k_proj", c.kv_dim(), h, c.qkv_bias);
    layer.v = r.linear(l + "self_attn.v_proj", c.kv_dim(), h, c.qkv_bias);
    layer.o = r.linear(l + "self_attn.o_proj", h, c.q_dim(), c.o_bias);
    layer.gate = r.linear(l + "mlp.gate_proj", f, h, c.mlp_bias);
    layer.up = r.linear(l + "mlp.up_proj", f, h, c.mlp_bias);
    layer.down = r.linear(l + "mlp.down_proj", h, f, c.mlp_bias);
    out.layers.push_back(std::move(layer));
  }
  out.final_norm = r.norm("model.norm", false);
}

void load_gpt2_layers(const DecoderParamReader& r, const DecoderConfig& c, DecoderParams& out) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = fmt::format("{}h.{}.", c.prefix, i);
    DecoderLayerParams layer;
    layer.attn_norm = r.norm(l + "ln_1", true);
    layer.mlp_norm = r.norm(l + "ln_2", true);
    layer.fused_qkv = true;
    layer.qkv = r.conv1d(l + "attn.c_attn", 3 * h, h);
    layer.o = r.conv1d(l + "attn.c_proj", h, h);
    layer.up = r.conv1d(l + "mlp.c_fc", f, h);
    layer.down = r.conv1d(l + "mlp.c_proj", h, f);
    out.layers.push_back(std::move(layer));
  }
  out.final_norm = r.norm(c.prefix + "ln_f", true);
  out.position_embeddings = r.read(c.prefix + "wpe.weight", {c.max_positions, h});
}

}  // namespace

DecoderParams load_decoder_params(const io::Checkpoint& ck, const DecoderConfig& cfg) {
  const DecoderParamReader r(ck, cfg);
  DecoderParams out;
  out.config = cfg;
  const bool gpt2 = cfg.arch == DecoderArch::Gpt2;
  const std::string embeddings = gpt2 ? cfg.prefix + "wte.weight" : "model.embed_tokens.weight";
  out.token_embeddings = r.read(embeddings, {cfg.vocab_size, cfg.hidden_size});
  if (gpt2)
    load_gpt2_layers(r, cfg, out);
  else
    load_llama_layers(r, cfg, out);
  out.lm_head.name = "lm_head";
  out.lm_head.out_features = cfg.vocab_size;
  out.lm_head.in_features = cfg.hidden_size;
  out.lm_head.weight = cfg.tie_word_embeddings ? out.token_embeddings
                                               : r.read("lm_head.weight", {cfg.vocab_size, cfg.hidden_size});
  return out;
}

}  // namespace qjoule::model

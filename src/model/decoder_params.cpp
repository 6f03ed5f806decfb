#include "qjoule/model/decoder_params.h"

#include <cstring>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"
#include "qjoule/model/prequantized/prequantized_linear.h"

namespace qjoule::model {
namespace {

// Where a deferred Linear's weights come from: the checkpoint tensor (GPT-2 Conv1D: stored [in, out]).
struct LinearSource {
  std::string weight;  // tensor name of the weight
  std::string bias;    // tensor name of the bias, empty for none
  bool conv1d = false;
};

// The tensor as FP32, its mapped pages released once converted.
std::vector<float> to_f32_released(const io::Checkpoint& ck, const std::string& name) {
  auto values = ck.to_f32(name);
  ck.release(name);
  return values;
}

class DecoderParamReader {
 public:
  DecoderParamReader(const io::Checkpoint& ck, const DecoderConfig& cfg, bool defer_linears)
      : ck_(ck), cfg_(cfg), defer_(defer_linears), sources_(std::make_shared<std::map<std::string, LinearSource>>()) {}

  // The tensor, its shape checked against the config.
  const io::TensorView& check(const std::string& name, const std::vector<int64_t>& expected) const {
    const auto& t = ck_.at(name);
    if (t.shape != expected)
      fail(
          "{}: tensor '{}' has shape {}, expected [{}] from config.json ({}: hidden {}, heads {}/{} of {}, "
          "intermediate {}, vocab {})",
          t.file.string(), name, t.shape_string(), fmt::join(expected, ", "), cfg_.architecture, cfg_.hidden_size,
          cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim, cfg_.intermediate_size, cfg_.vocab_size);
    return t;
  }

  // A BF16 tensor's words as stored, its shape checked; its mapped pages are released once copied.
  std::vector<uint16_t> read_bf16(const std::string& name, const std::vector<int64_t>& expected) const {
    const auto& t = check(name, expected);
    std::vector<uint16_t> bits(static_cast<std::size_t>(t.numel()));
    std::memcpy(bits.data(), t.data, bits.size() * sizeof(uint16_t));
    ck_.release(name);
    return bits;
  }

  // The tensor as FP32, its shape checked; its mapped pages are released once converted.
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& expected) const {
    check(name, expected);
    return to_f32_released(ck_, name);
  }

  // nn.Linear: weight [out, in]; a pre-quantized checkpoint's from its packed tensors, checked now and
  // repacked when the model builds it.
  LinearParams linear(const std::string& name, int64_t out, int64_t in, bool bias) const {
    if (cfg_.quantization) {
      mark_prequantized_tensors_read(ck_, name);  // ck_: the checkpoint the unused-tensor warning reads
      return prequantized_linear_params(shared(), *cfg_.quantization, name, out, in, bias);
    }
    return make(name, out, in, LinearSource{name + ".weight", bias ? name + ".bias" : "", false}, {out, in});
  }

  // A mixture's router: its weight as stored, also in a pre-quantized checkpoint (GPTQ and AWQ leave it unquantized).
  LinearParams router(const std::string& name, int64_t out, int64_t in) const {
    return make(name, out, in, LinearSource{name + ".weight", "", false}, {out, in});
  }

  // GPT-2's Conv1D: weight stored [in, out], transposed to [out, in].
  LinearParams conv1d(const std::string& name, int64_t out, int64_t in) const {
    return make(name, out, in, LinearSource{name + ".weight", name + ".bias", true}, {in, out});
  }

  // lm_head: its own weight, or the token embeddings when tied; held as the checkpoint stores it (16 bits or 32).
  LinearParams lm_head(const std::string& weight_tensor) const {
    auto p = make("lm_head", cfg_.vocab_size, cfg_.hidden_size, LinearSource{weight_tensor, "", false},
                  {cfg_.vocab_size, cfg_.hidden_size});
    const io::DType stored = ck_.at(weight_tensor).dtype;
    p.head_stored = stored == io::DType::BF16  ? quant::Format::bf16
                    : stored == io::DType::F16 ? quant::Format::fp16
                                               : quant::Format::fp32;
    return p;
  }

  LayerNormParams norm(const std::string& name, bool beta, int64_t width = 0) const {
    if (width == 0) width = cfg_.hidden_size;
    LayerNormParams n;
    n.name = name;
    n.gamma = read(name + ".weight", {width});
    if (cfg_.norm_offset_one)  // Gemma: applied as 1 + w, in FP32 as transformers computes it
      for (float& g : n.gamma) g = 1.0f + g;
    if (beta) n.beta = read(name + ".bias", {width});
    return n;
  }

  // Fills p.weight and p.bias from the checkpoint (a Linear made in deferred mode).
  static void load(const io::Checkpoint& ck, const LinearSource& src, LinearParams& p) {
    p.weight = to_f32_released(ck, src.weight);
    if (src.conv1d) {
      std::vector<float> transposed(p.weight.size());
      const int64_t in = p.in_features, out = p.out_features;
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o)
          transposed[static_cast<size_t>(o * in + i)] = p.weight[static_cast<size_t>(i * out + o)];
      p.weight = std::move(transposed);
    }
    if (!src.bias.empty()) p.bias = to_f32_released(ck, src.bias);
  }

  std::shared_ptr<const std::map<std::string, LinearSource>> sources() const { return sources_; }

  // The checkpoint, shared with the pre-quantized Linears' builders (one copy of its tensor table and
  // its maps, kept open for as long as the parameters live).
  std::shared_ptr<const io::Checkpoint> shared() const {
    if (!shared_) shared_ = std::make_shared<const io::Checkpoint>(ck_);
    return shared_;
  }

 private:
  LinearParams make(const std::string& name, int64_t out, int64_t in, const LinearSource& src,
                    const std::vector<int64_t>& stored_shape) const {
    LinearParams p;
    p.name = name;
    p.out_features = out;
    p.in_features = in;
    p.has_bias = !src.bias.empty();
    check(src.weight, stored_shape);
    if (!src.bias.empty()) check(src.bias, {out});
    if (defer_) {
      (*sources_)[name] = src;
    } else {
      load(ck_, src, p);
    }
    return p;
  }

  const io::Checkpoint& ck_;
  mutable std::shared_ptr<const io::Checkpoint> shared_;
  const DecoderConfig& cfg_;
  bool defer_;
  std::shared_ptr<std::map<std::string, LinearSource>> sources_;
};

// A mixture's router ("<block>gate") and experts ("<block>experts.{e}."), under block "…layers.{i}.mlp." or
// Mixtral's "…block_sparse_moe.".
void load_experts(const DecoderParamReader& r, const DecoderConfig& c, const std::string& block,
                  DecoderLayerParams& layer) {
  const int64_t h = c.hidden_size, f = c.moe.expert_intermediate_size;
  layer.router = r.router(block + "gate", c.moe.num_experts, h);
  const bool w = c.moe_mixtral_names();
  for (int64_t e = 0; e < c.moe.num_experts; ++e) {
    const std::string x = fmt::format("{}experts.{}.", block, e);
    layer.experts.push_back({r.linear(x + (w ? "w1" : "gate_proj"), f, h, false),
                             r.linear(x + (w ? "w3" : "up_proj"), f, h, false),
                             r.linear(x + (w ? "w2" : "down_proj"), h, f, false)});
  }
}

void load_llama_layers(const DecoderParamReader& r, const DecoderConfig& c, DecoderParams& out) {
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = fmt::format("{}layers.{}.", c.prefix, i);
    DecoderLayerParams layer;
    layer.attn_norm = r.norm(l + "input_layernorm", false);
    if (c.sandwich_norms) {
      layer.attn_post_norm = r.norm(l + "post_attention_layernorm", false);
      layer.mlp_norm = r.norm(l + "pre_feedforward_layernorm", false);
      layer.mlp_post_norm = r.norm(l + "post_feedforward_layernorm", false);
    } else {
      layer.mlp_norm = r.norm(l + "post_attention_layernorm", false);
    }
    if (c.fused_projections) {  // Phi-3: qkv_proj [q | k | v], gate_up_proj [gate | up]
      layer.fused_qkv = true;
      layer.qkv = r.linear(l + "self_attn.qkv_proj", c.q_dim() + 2 * c.kv_dim(), h, c.qkv_bias);
      layer.gate_up = r.linear(l + "mlp.gate_up_proj", 2 * f, h, c.mlp_bias);
    } else {
      layer.q = r.linear(l + "self_attn.q_proj", c.q_dim(), h, c.qkv_bias);
      layer.k = r.linear(l + "self_attn.k_proj", c.kv_dim(), h, c.qkv_bias);
      layer.v = r.linear(l + "self_attn.v_proj", c.kv_dim(), h, c.qkv_bias);
      if (!c.moe_layer(i)) {
        layer.gate = r.linear(l + "mlp.gate_proj", f, h, c.mlp_bias);
        layer.up = r.linear(l + "mlp.up_proj", f, h, c.mlp_bias);
      }
    }
    layer.o = r.linear(l + "self_attn.o_proj", h, c.q_dim(), c.o_bias);
    if (c.qk_norm) {
      layer.q_norm = r.norm(l + "self_attn.q_norm", false, c.qk_norm_whole ? c.q_dim() : c.head_dim);
      layer.k_norm = r.norm(l + "self_attn.k_norm", false, c.qk_norm_whole ? c.kv_dim() : c.head_dim);
    }
    if (c.moe_layer(i))
      load_experts(r, c, l + c.moe_block(), layer);
    else
      layer.down = r.linear(l + "mlp.down_proj", h, f, c.mlp_bias);
    out.layers.push_back(std::move(layer));
  }
  out.final_norm = r.norm(c.prefix + "norm", false);
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

DecoderParams load_decoder_params(const io::Checkpoint& ck, const DecoderConfig& cfg, bool defer_linears) {
  const DecoderParamReader r(ck, cfg, defer_linears);
  DecoderParams out;
  out.config = cfg;
  const bool gpt2 = cfg.arch == DecoderArch::Gpt2;
  const std::string embeddings = cfg.prefix + (gpt2 ? "wte.weight" : "embed_tokens.weight");
  // A BF16 checkpoint's embeddings stay BF16 (exact: each row is widened when looked up); GPT-2's are
  // summed with its positions in FP32.
  if (!gpt2 && ck.at(embeddings).dtype == io::DType::BF16)
    out.token_embeddings_bf16 = r.read_bf16(embeddings, {cfg.vocab_size, cfg.hidden_size});
  else
    out.token_embeddings = r.read(embeddings, {cfg.vocab_size, cfg.hidden_size});
  if (gpt2)
    load_gpt2_layers(r, cfg, out);
  else
    load_llama_layers(r, cfg, out);
  out.lm_head = r.lm_head(cfg.tie_word_embeddings ? embeddings : cfg.lm_head_tensor);
  if (defer_linears) {
    out.load_linear = [&ck, sources = r.sources()](LinearParams& p) {
      const auto it = sources->find(p.name);
      if (it == sources->end()) fail("{}: no deferred Linear '{}' in this checkpoint", ck.source().string(), p.name);
      DecoderParamReader::load(ck, it->second, p);
    };
  }
  return out;
}

}  // namespace qjoule::model

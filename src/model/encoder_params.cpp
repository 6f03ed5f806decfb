#include "qjoule/model/encoder_params.h"

#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"
#include "qjoule/model/prequantized/prequantized_linear.h"

namespace qjoule::model {
namespace {

class ParamReader {
 public:
  ParamReader(const io::Checkpoint& ck, const EncoderConfig& cfg) : ck_(ck), cfg_(cfg) {}

  std::vector<float> read(const std::string& name, const std::vector<int64_t>& expected) const {
    const auto& t = ck_.at(name);
    if (t.shape != expected)
      fail(
          "{}: tensor '{}' has shape {}, expected [{}] from config.json ({}: hidden {}, ffn {}, vocab {}, positions {})",
          t.file.string(), name, t.shape_string(), fmt::join(expected, ", "), cfg_.architecture, cfg_.hidden_size,
          cfg_.intermediate_size, cfg_.vocab_size, cfg_.max_positions);
    return ck_.to_f32(name);
  }

  // A transformer layer's Linear (`in_layer`) of a pre-quantized checkpoint must be packed; the pooler and
  // the classifier may be either.
  LinearParams linear(const std::string& name, int64_t out, int64_t in, bool in_layer = true) const {
    if (cfg_.quantization && is_prequantized_linear(ck_, name)) {
      mark_prequantized_tensors_read(ck_, name);  // ck_: the checkpoint the unused-tensor warning reads
      return prequantized_linear_params(shared(), *cfg_.quantization, name, out, in, /*bias_expected=*/true);
    }
    if (cfg_.quantization && in_layer && ck_.contains(name + ".weight")) {
      const auto& t = ck_.at(name + ".weight");
      fail(
          "{}: Linear '{}' is not packed: its weight is {} {}, but config.json's quantization_config says {} (a "
          "transformer layer's Linear holds qweight, qzeros and scales, or bitsandbytes' weight.absmax and quant "
          "state)",
          t.file.string(), name, io::dtype_name(t.dtype), t.shape_string(), cfg_.quantization->describe());
    }
    LinearParams p;
    p.name = name;
    p.out_features = out;
    p.in_features = in;
    p.weight = read(name + ".weight", {out, in});
    p.bias = read(name + ".bias", {out});
    return p;
  }

  // The checkpoint, shared with the pre-quantized Linears' builders (decoder_params.cpp does the same).
  std::shared_ptr<const io::Checkpoint> shared() const {
    if (!shared_) shared_ = std::make_shared<const io::Checkpoint>(ck_);
    return shared_;
  }

  LayerNormParams norm(const std::string& name) const {
    return {name, read(name + ".weight", {cfg_.hidden_size}), read(name + ".bias", {cfg_.hidden_size})};
  }

 private:
  const io::Checkpoint& ck_;
  const EncoderConfig& cfg_;
  mutable std::shared_ptr<const io::Checkpoint> shared_;
};

}  // namespace

EncoderParams load_encoder_params(const io::Checkpoint& ck, const EncoderConfig& cfg) {
  const ParamReader r(ck, cfg);
  const int64_t h = cfg.hidden_size;
  const int64_t f = cfg.intermediate_size;
  const std::string p = cfg.prefix();
  EncoderParams out;
  out.config = cfg;
  out.word_embeddings = r.read(p + "embeddings.word_embeddings.weight", {cfg.vocab_size, h});
  out.position_embeddings = r.read(p + "embeddings.position_embeddings.weight", {cfg.max_positions, h});
  out.embedding_norm = r.norm(p + "embeddings.LayerNorm");
  if (cfg.arch == EncoderArch::Bert) {
    out.token_type_embeddings = r.read(p + "embeddings.token_type_embeddings.weight", {cfg.type_vocab_size, h});
  }
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    EncoderLayerParams layer;
    if (cfg.arch == EncoderArch::Bert) {
      const std::string l = fmt::format("{}encoder.layer.{}.", p, i);
      layer.q = r.linear(l + "attention.self.query", h, h);
      layer.k = r.linear(l + "attention.self.key", h, h);
      layer.v = r.linear(l + "attention.self.value", h, h);
      layer.o = r.linear(l + "attention.output.dense", h, h);
      layer.attn_norm = r.norm(l + "attention.output.LayerNorm");
      layer.ffn_in = r.linear(l + "intermediate.dense", f, h);
      layer.ffn_out = r.linear(l + "output.dense", h, f);
      layer.ffn_norm = r.norm(l + "output.LayerNorm");
    } else {
      const std::string l = fmt::format("{}transformer.layer.{}.", p, i);
      layer.q = r.linear(l + "attention.q_lin", h, h);
      layer.k = r.linear(l + "attention.k_lin", h, h);
      layer.v = r.linear(l + "attention.v_lin", h, h);
      layer.o = r.linear(l + "attention.out_lin", h, h);
      layer.attn_norm = r.norm(l + "sa_layer_norm");
      layer.ffn_in = r.linear(l + "ffn.lin1", f, h);
      layer.ffn_out = r.linear(l + "ffn.lin2", h, f);
      layer.ffn_norm = r.norm(l + "output_layer_norm");
    }
    out.layers.push_back(std::move(layer));
  }
  out.head_dense = r.linear(cfg.arch == EncoderArch::Bert ? p + "pooler.dense" : "pre_classifier", h, h, false);
  out.classifier = r.linear("classifier", cfg.num_labels, h, false);
  return out;
}

LinearParams prequantized_linear_params(std::shared_ptr<const io::Checkpoint> checkpoint,
                                        const CheckpointQuantization& q, const std::string& name, int64_t out,
                                        int64_t in, bool bias_expected) {
  const io::Checkpoint& ck = *checkpoint;
  check_prequantized_linear(ck, q, name, out, in);
  LinearParams p;
  p.name = name;
  p.out_features = out;
  p.in_features = in;
  p.has_bias = ck.contains(name + ".bias");
  if (bias_expected && !p.has_bias)
    fail("{}: tensor '{}.bias' is missing (config.json gives this Linear a bias)", ck.source().string(), name);
  mark_prequantized_tensors_read(ck, name);
  p.prequantized_spec = prequantized_spec(q);
  p.prequantized_from = q.describe();
  p.build_prequantized = [checkpoint = std::move(checkpoint), q, name, out, in] {
    return load_prequantized_linear(*checkpoint, q, name, out, in);
  };
  return p;
}

}  // namespace qjoule::model

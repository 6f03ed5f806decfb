#include "qjoule/model/synthetic/synthetic_encoder.h"

#include <cmath>

#include <fmt/format.h>

#include "model/synthetic/synthetic_rng.h"
#include "qjoule/error.h"

namespace qjoule::model {
namespace {

using Rng = detail::SyntheticRng;

std::vector<float> normal_vector(Rng& rng, int64_t n, float stddev) {
  return detail::synthetic_normal_vector(rng, n, stddev);
}

LinearParams linear_with_bias(Rng& rng, std::string name, int64_t out, int64_t in) {
  return detail::synthetic_linear(rng, std::move(name), out, in, true);
}

LayerNormParams norm(std::string name, int64_t h) {
  return {std::move(name), std::vector<float>(std::size_t(h), 1.0f), std::vector<float>(std::size_t(h), 0.0f)};
}

}  // namespace

SyntheticEncoderSpec distilbert_base_spec() { return {}; }

EncoderConfig synthetic_encoder_config(const SyntheticEncoderSpec& spec) {
  EncoderConfig c;
  c.arch = EncoderArch::DistilBert;
  c.model_type = "distilbert";
  c.architecture = "DistilBertForSequenceClassification";
  c.vocab_size = spec.vocab_size;
  c.hidden_size = spec.hidden_size;
  c.num_layers = spec.num_layers;
  c.num_heads = spec.num_heads;
  c.intermediate_size = spec.intermediate_size;
  c.max_positions = spec.max_positions;
  c.num_labels = spec.num_labels;
  c.activation = "gelu";
  for (int64_t i = 0; i < spec.num_labels; ++i) c.id2label.push_back(fmt::format("LABEL_{}", i));
  return c;
}

EncoderParams synthetic_encoder_params(const SyntheticEncoderSpec& spec) {
  if (spec.hidden_size <= 0 || spec.num_heads <= 0 || spec.hidden_size % spec.num_heads != 0)
    fail("synthetic model '{}': hidden size {} is not a multiple of {} heads", spec.name, spec.hidden_size,
         spec.num_heads);
  if (spec.vocab_size <= 1000 || spec.num_layers <= 0 || spec.intermediate_size <= 0 || spec.max_positions <= 1 ||
      spec.num_labels <= 0)
    fail(
        "synthetic model '{}': every size must be positive (vocab above 1000), got vocab {}, layers {}, FFN {}, "
        "positions {}, labels {}",
        spec.name, spec.vocab_size, spec.num_layers, spec.intermediate_size, spec.max_positions, spec.num_labels);
  EncoderParams p;
  p.config = synthetic_encoder_config(spec);

  Rng rng(spec.seed);
  const int64_t h = spec.hidden_size, f = spec.intermediate_size;
  p.word_embeddings = normal_vector(rng, spec.vocab_size * h, 0.02f);
  p.position_embeddings = normal_vector(rng, spec.max_positions * h, 0.02f);
  p.embedding_norm = norm("distilbert.embeddings.LayerNorm", h);
  for (int64_t i = 0; i < spec.num_layers; ++i) {
    const std::string l = fmt::format("distilbert.transformer.layer.{}.", i);
    EncoderLayerParams layer;
    layer.q = linear_with_bias(rng, l + "attention.q_lin", h, h);
    layer.k = linear_with_bias(rng, l + "attention.k_lin", h, h);
    layer.v = linear_with_bias(rng, l + "attention.v_lin", h, h);
    layer.o = linear_with_bias(rng, l + "attention.out_lin", h, h);
    layer.attn_norm = norm(l + "sa_layer_norm", h);
    layer.ffn_in = linear_with_bias(rng, l + "ffn.lin1", f, h);
    layer.ffn_out = linear_with_bias(rng, l + "ffn.lin2", h, f);
    layer.ffn_norm = norm(l + "output_layer_norm", h);
    p.layers.push_back(std::move(layer));
  }
  p.head_dense = linear_with_bias(rng, "pre_classifier", h, h);
  p.classifier = linear_with_bias(rng, "classifier", spec.num_labels, h);
  return p;
}

std::vector<int32_t> synthetic_token_ids(const SyntheticEncoderSpec& spec, std::size_t count, std::size_t seq) {
  if (seq < 2 || seq > static_cast<std::size_t>(spec.max_positions))
    fail("synthetic inputs: sequence length {} is outside [2, {}] (the model's max_position_embeddings)", seq,
         spec.max_positions);
  Rng rng(spec.seed ^ 0x5eedull);
  std::vector<int32_t> ids(count * seq);
  for (std::size_t s = 0; s < count; ++s) {
    int32_t* row = ids.data() + s * seq;
    row[0] = 101;
    for (std::size_t t = 1; t + 1 < seq; ++t)
      row[t] = static_cast<int32_t>(1000 + rng.next() % static_cast<std::uint64_t>(spec.vocab_size - 1000));
    row[seq - 1] = 102;
  }
  return ids;
}

}  // namespace qjoule::model

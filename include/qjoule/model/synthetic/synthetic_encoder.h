// A DistilBERT-shaped classifier with random weights from a fixed seed: the model `qjoule bench`
// and the end-to-end benchmark run when no checkpoint is given. Only its shapes are realistic; its
// accuracy means nothing, so results on it report fidelity to its own FP32 run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/model/encoder_params.h"

namespace qjoule::model {

struct SyntheticEncoderSpec {
  std::string name = "distilbert-base";
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_layers = 6;
  int64_t num_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t max_positions = 512;
  int64_t num_labels = 2;
  std::uint64_t seed = 20261123;
};

// DistilBERT-base's shapes (6 layers, dim 768, 12 heads, FFN 3072, vocab 30,522, 512 positions).
SyntheticEncoderSpec distilbert_base_spec();

// Parameters named as Hugging Face's DistilBertForSequenceClassification names them, so layer
// patterns (--quant-exclude '*.layer.0.*') work as on a real checkpoint. Weights ~ N(0, 0.02) as
// in BERT's initializer, LayerNorm gamma 1 and beta 0, biases 0. The same spec gives the same
// parameters on every machine (a fixed-seed generator of its own, not std's distributions).
EncoderParams synthetic_encoder_params(const SyntheticEncoderSpec& spec);
// The config synthetic_encoder_params gives its parameters (DistilBERT, GELU, labels LABEL_0 ..).
EncoderConfig synthetic_encoder_config(const SyntheticEncoderSpec& spec);

// `count` sequences of `seq` token ids in [1000, vocab) starting with [CLS] (101) and ending with
// [SEP] (102), all tokens real (mask 1), from the spec's seed: fixed inputs for timing runs.
std::vector<int32_t> synthetic_token_ids(const SyntheticEncoderSpec& spec, std::size_t count, std::size_t seq);

}  // namespace qjoule::model

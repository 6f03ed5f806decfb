// A DistilBERT-shaped synthetic classifier small enough for unit tests (2 layers, dim 64, 4 heads, FFN
// 128, vocab 1,100, 32 positions): its shapes are what tests of per-layer logic need, its size keeps
// them fast.
#pragma once

#include "qjoule/model/synthetic/synthetic_encoder.h"

namespace qjoule::test {

inline model::SyntheticEncoderSpec small_encoder_spec() {
  model::SyntheticEncoderSpec s;
  s.name = "small";
  s.vocab_size = 1100;
  s.hidden_size = 64;
  s.num_layers = 2;
  s.num_heads = 4;
  s.intermediate_size = 128;
  s.max_positions = 32;
  return s;
}

}  // namespace qjoule::test

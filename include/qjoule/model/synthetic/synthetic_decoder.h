// A Llama-architecture decoder with random weights from a fixed seed, held in memory (no checkpoint):
// the model the decode benchmark runs so that every format's weights are the size of a real 1B model.
// Only its shapes are realistic; its text means nothing.
#pragma once

#include <cstdint>
#include <string>

#include "qjoule/model/decoder_params.h"

namespace qjoule::model {

struct SyntheticDecoderSpec {
  std::string name = "tinyllama-1.1b-shapes";
  int64_t vocab_size = 4096;  // TinyLlama has 32,000; a small vocabulary keeps the head a small part
  int64_t hidden_size = 2048;
  int64_t num_layers = 22;
  int64_t num_heads = 32;
  int64_t num_kv_heads = 4;
  int64_t intermediate_size = 5632;
  int64_t max_positions = 2048;
  std::uint64_t seed = 20261125;
};

// TinyLlama-1.1B's shapes (22 layers, hidden 2048, 32 heads, 4 KV heads, FFN 5632) with `vocab` tokens.
SyntheticDecoderSpec tinyllama_shapes_spec(int64_t vocab = 4096);

// Parameters named as Hugging Face's LlamaForCausalLM names them ("model.layers.0.self_attn.q_proj",
// "lm_head"), weights ~ N(0, 0.02) (lm_head untied, marked as a BF16 checkpoint stores it: held in BF16
// below FP32), RMSNorm gammas 1, no biases, RoPE theta 10,000.
// A spec whose sizes are not positive or whose heads do not divide the hidden size is an error.
DecoderParams synthetic_decoder_params(const SyntheticDecoderSpec& spec);

}  // namespace qjoule::model

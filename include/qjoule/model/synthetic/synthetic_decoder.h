// A Llama-architecture decoder with random weights from a fixed seed, held in memory (no checkpoint):
// the model the decode benchmark runs so that every format's weights are the size of a real 1B model.
// Only its shapes are realistic; its text means nothing. With experts, a Mixtral-architecture one.
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
  // > 0: a Mixtral (MixtralForCausalLM) whose every MLP is `num_experts` experts of intermediate_size, top
  // `experts_per_token`; the experts' weights are drawn when the model builds each one (DecoderParams::load_linear),
  // so that a model larger than memory in FP32 never holds more than one expert in FP32.
  int64_t num_experts = 0;
  int64_t experts_per_token = 2;
};

// TinyLlama-1.1B's shapes (22 layers, hidden 2048, 32 heads, 4 KV heads, FFN 5632) with `vocab` tokens.
SyntheticDecoderSpec tinyllama_shapes_spec(int64_t vocab = 4096);

// A Mixtral-shaped mixture (hidden 2048, 16 layers, 32/8 heads, 8 experts of FFN 5632, top-2: 4.4 B parameters,
// 1.3 B of them read a token) with `vocab` tokens.
SyntheticDecoderSpec mixtral_shapes_spec(int64_t vocab = 4096);

// Parameters named as Hugging Face's LlamaForCausalLM names them ("model.layers.0.self_attn.q_proj",
// "lm_head"), weights ~ N(0, 0.02) (lm_head untied, marked as a BF16 checkpoint stores it: held in BF16
// below FP32), RMSNorm gammas 1, no biases, RoPE theta 10,000.
// With experts: MixtralForCausalLM's names ("model.layers.0.block_sparse_moe.experts.3.w1", the router
// "...block_sparse_moe.gate"), the experts' weights empty until DecoderParams::load_linear draws them.
// A spec whose sizes are not positive or whose heads do not divide the hidden size is an error.
DecoderParams synthetic_decoder_params(const SyntheticDecoderSpec& spec);

}  // namespace qjoule::model

// Hugging Face config.json for decoder language models (Llama family, Qwen2, Qwen3, GPT-2), reconciled with
// the checkpoint's tensor shapes: fields missing from config.json are inferred from the tensors where
// they can be (vocab, hidden, layers, positions, KV heads, intermediate size), and a field that
// disagrees with the tensors is an error naming both values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"
#include "qjoule/kernels/decoder_ops.h"

namespace qjoule::model {

enum class DecoderArch { Llama, Qwen2, Qwen3, Gpt2 };

struct DecoderConfig {
  DecoderArch arch = DecoderArch::Llama;
  std::string model_type;    // "llama" | "mistral" | "qwen2" | "qwen3" | "gpt2"
  std::string architecture;  // "LlamaForCausalLM" | "MistralForCausalLM" | "Qwen2ForCausalLM" | "Qwen3ForCausalLM" |
                             // "GPT2LMHeadModel"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  float norm_eps = 1e-5f;  // rms_norm_eps (Llama, Qwen2) or layer_norm_epsilon (GPT-2)
  double rope_theta = 10000.0;
  kernels::RopeScaling rope_scaling;  // Llama / Qwen2 only
  bool tie_word_embeddings = false;   // lm_head shares the token embeddings (no lm_head.weight tensor)
  bool qkv_bias = false;              // Q/K/V projections have biases (Qwen2, GPT-2, attention_bias)
  bool o_bias = false;                // attention output has a bias (GPT-2, attention_bias)
  bool mlp_bias = false;              // MLP projections have biases (GPT-2, mlp_bias)
  bool qk_norm = false;               // each head of q and k RMS-normalized before RoPE (Qwen3: q_norm, k_norm)
  std::string activation;             // "silu" (SwiGLU) or "gelu_new" (GPT-2, tanh approximation)
  std::optional<int32_t> bos_token_id, eos_token_id;
  std::string prefix;                        // tensor-name prefix: "model." (Llama/Qwen2), "transformer." or "" (GPT-2)
  std::vector<std::string> inferred_fields;  // fields that came from tensor shapes, not config.json
  // A pre-quantized checkpoint's method and layout (GPTQ / AWQ, Llama family): its Linears are read
  // from their packed tensors (model/prequantized/prequantized_linear.h); nullopt for an unquantized checkpoint.
  std::optional<CheckpointQuantization> quantization;

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return num_kv_heads * head_dim; }
};

// Supported decoder architectures, for messages and --help.
std::string supported_decoder_architectures();

// What config.json in `dir` describes, read from model_type / architectures alone.
enum class ModelFamily { Encoder, Decoder, Unknown };
ModelFamily model_family(const std::filesystem::path& dir);

// Reads `dir`/config.json and reconciles it with `checkpoint`.
DecoderConfig load_decoder_config(const std::filesystem::path& dir, const io::Checkpoint& checkpoint);

}  // namespace qjoule::model

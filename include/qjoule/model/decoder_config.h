// Hugging Face config.json for decoder language models (Llama family, Qwen2, Qwen3, Gemma 3, Phi-3, GPT-2, and the
// mixture-of-experts Mixtral, Qwen3-MoE and OLMoE), reconciled with
// the checkpoint's tensor shapes: fields missing from config.json are inferred from the tensors where
// they can be (vocab, hidden, layers, positions, KV heads, intermediate size), and a field that
// disagrees with the tensors is an error naming both values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"
#include "qjoule/kernels/decoder_ops.h"

namespace qjoule::model {

enum class DecoderArch { Llama, Qwen2, Qwen3, Gemma3, Phi3, Gpt2, Mixtral, Qwen3Moe, Olmoe };

// A mixture-of-experts MLP (Mixtral, Qwen3-MoE, OLMoE): a router Linear (hidden → experts, kept FP32) scores
// every expert, softmax over them, the top `experts_per_token` chosen, their weights renormalised to sum to 1
// when `normalize_top_k`; the block's output is the chosen experts' SwiGLU MLPs weighted so.
struct MoeConfig {
  int64_t num_experts = 0;  // 0: a dense model
  int64_t experts_per_token = 0;
  int64_t expert_intermediate_size = 0;  // each expert's FFN width (Qwen3-MoE: moe_intermediate_size)
  bool normalize_top_k = true;           // Mixtral always; Qwen3-MoE / OLMoE: norm_topk_prob
  // Per layer, whether its MLP is the mixture (Qwen3-MoE: not in mlp_only_layers and (i + 1) % decoder_sparse_step
  // == 0; every layer elsewhere); a dense layer's MLP is intermediate_size wide.
  std::vector<bool> sparse_layer;
};

struct DecoderConfig {
  DecoderArch arch = DecoderArch::Llama;
  std::string model_type;    // "llama" | "mistral" | "qwen2" | "qwen3" | "gemma3_text" | "gemma3" | "phi3" | "gpt2"
  std::string architecture;  // "LlamaForCausalLM" | "MistralForCausalLM" | "Qwen2ForCausalLM" | "Qwen3ForCausalLM" |
                             // "Gemma3ForCausalLM" | "Gemma3ForConditionalGeneration" (its text part) |
                             // "Phi3ForCausalLM" (Phi-3, Phi-4-mini) |
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
  kernels::RopeScaling rope_scaling;  // RoPE models (of the full-attention layers, where they differ)
  int64_t rotary_dim = 0;             // the values of each head RoPE turns: head_dim, or less (partial_rotary_factor)
  // Per layer, the keys its attention reads: 0 every earlier token, w > 0 the last w (a sliding window,
  // Hugging Face's mask: position − key < w). Empty: every layer 0.
  std::vector<int64_t> layer_window;
  // Gemma 3: the sliding-window layers' own RoPE base (rope_local_base_freq), no scaling; 0: one RoPE.
  double local_rope_theta = 0.0;
  float attention_scale = 0.0f;  // softmax(q·kᵀ·scale): 0 means 1/sqrt(head_dim); Gemma 3: query_pre_attn_scalar^−½
  float embedding_scale = 1.0f;      // Gemma: the token embeddings times sqrt(hidden_size) (not the tied head)
  bool sandwich_norms = false;       // Gemma 3: RMSNorms after attention and after the MLP too, before the residual add
  bool norm_offset_one = false;      // Gemma: RMSNorm weights stored as w, applied as 1 + w (folded in when read)
  bool tie_word_embeddings = false;  // lm_head shares the token embeddings (no lm_head.weight tensor)
  bool qkv_bias = false;             // Q/K/V projections have biases (Qwen2, GPT-2, attention_bias)
  bool o_bias = false;               // attention output has a bias (GPT-2, attention_bias)
  bool mlp_bias = false;             // MLP projections have biases (GPT-2, mlp_bias)
  bool qk_norm = false;              // each head of q and k RMS-normalized before RoPE (Qwen3: q_norm, k_norm)
  bool qk_norm_whole = false;  // with qk_norm: all of q's columns (and of k's) normalized as one (OLMoE), not per head
  // "silu" (SwiGLU), "gelu_pytorch_tanh" (Gemma's GeGLU) or "gelu_new" (GPT-2, tanh approximation)
  std::string activation;
  bool fused_projections = false;  // Phi-3: one qkv_proj ([q | k | v] rows) and one gate_up_proj ([gate | up])
  std::optional<int32_t> bos_token_id, eos_token_id;
  // Tensor-name prefix: "model." (Llama / Qwen / Gemma3ForCausalLM), "language_model.model." or
  // "model.language_model." (Gemma3ForConditionalGeneration), "transformer." or "" (GPT-2).
  std::string prefix;
  std::string lm_head_tensor;                // the untied head's weight: "lm_head.weight" (or under language_model.)
  std::vector<std::string> inferred_fields;  // fields that came from tensor shapes, not config.json
  // A pre-quantized checkpoint's method and layout (GPTQ / AWQ, Llama family): its Linears are read
  // from their packed tensors (model/prequantized/prequantized_linear.h); nullopt for an unquantized checkpoint.
  std::optional<CheckpointQuantization> quantization;
  MoeConfig moe;  // num_experts 0: dense

  bool moe_layer(int64_t layer) const {
    return moe.num_experts > 0 && moe.sparse_layer.at(static_cast<std::size_t>(layer));
  }
  int64_t moe_layer_count() const {
    return moe.num_experts > 0 ? std::count(moe.sparse_layer.begin(), moe.sparse_layer.end(), true) : 0;
  }
  // A mixture's tensor names under a layer: Mixtral's "block_sparse_moe." (experts.{e}.w1 / w3 / w2 for gate,
  // up, down, and the router gate), else "mlp." (experts.{e}.gate_proj / up_proj / down_proj, gate).
  bool moe_mixtral_names() const { return arch == DecoderArch::Mixtral; }
  std::string moe_block() const { return moe_mixtral_names() ? "block_sparse_moe." : "mlp."; }

  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t window(int64_t layer) const {
    return layer_window.empty() ? 0 : layer_window.at(static_cast<std::size_t>(layer));
  }
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

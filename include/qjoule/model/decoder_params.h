// The FP32 parameters of a decoder language model, read from a checkpoint and checked against the
// config, before any quantization.
//
// Every Linear is held in Hugging Face nn.Linear layout ([out, in]); GPT-2's Conv1D weights (stored
// [in, out]) are transposed on load. Linear names are the checkpoint's module names, e.g.
// "model.layers.0.self_attn.q_proj" or "h.0.attn.c_attn", and "lm_head" for the output projection
// (also when it is tied to the token embeddings), so --quant-include / --layer-precision patterns read
// as they do for the checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/encoder_params.h"

namespace qjoule::model {

// Llama / Qwen2 / Qwen3 block (pre-norm, RMSNorm without beta):
//   x += o(attention(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))));  x += down(silu(gate(n2(x))) · up(n2(x)))
//   Qwen3: each head of q and of k RMS-normalized (q_norm, k_norm: [head_dim]) before RoPE.
//   Gemma 3: the same with q/k norms, GeGLU (gelu_tanh) for silu, and sandwich norms: attention's output and
//   the MLP's each RMS-normalized before the residual add (attn_post_norm, mlp_post_norm); every norm's
//   weight read as 1 + w.
//   Mixtral / Qwen3-MoE / OLMoE: the MLP a mixture of experts (DecoderConfig::moe) in the layers it names: the
//   router scores the experts, each token runs its top-k experts' SwiGLU MLPs, weighted by their routing
//   weights. OLMoE normalizes all of q (and of k) as one vector (q_norm: [q_dim], k_norm: [kv_dim]).
// GPT-2 block (pre-norm, LayerNorm):
//   x += o(attention(qkv(n1(x))));  x += down(gelu_tanh(up(n2(x))))      (qkv = c_attn, up = c_fc, down = c_proj)
// One expert of a mixture: a SwiGLU MLP (Mixtral's w1, w3, w2).
struct ExpertParams {
  LinearParams gate, up, down;
};

struct DecoderLayerParams {
  LayerNormParams attn_norm, mlp_norm;  // beta empty for RMSNorm
  LayerNormParams q_norm, k_norm;       // config.qk_norm only: RMSNorm of each head, gamma [head_dim]
  // config.sandwich_norms only (Gemma 3): post_attention_layernorm, post_feedforward_layernorm. There
  // attn_norm is input_layernorm and mlp_norm pre_feedforward_layernorm.
  LayerNormParams attn_post_norm, mlp_post_norm;
  bool fused_qkv = false;  // GPT-2, Phi-3: one Linear `qkv` whose output columns are [q | k | v]
  LinearParams qkv;        // fused_qkv only
  LinearParams gate_up;    // Phi-3: one Linear whose output columns are [gate | up]; else empty
  LinearParams q, k, v;    // !fused_qkv
  LinearParams o;
  LinearParams gate;  // SwiGLU only (Llama / Qwen2)
  LinearParams up, down;
  // A mixture-of-experts layer (config.moe_layer): the router [experts, hidden] and the experts; the dense MLP's
  // Linears above stay empty.
  LinearParams router;
  std::vector<ExpertParams> experts;
};

struct DecoderParams {
  DecoderConfig config;
  std::vector<float> token_embeddings;  // [vocab, hidden]; empty when token_embeddings_bf16 holds them
  // A BF16 checkpoint's token embeddings as stored ([vocab, hidden] BF16 words; RoPE decoders): held so,
  // each row widened to FP32 exactly when looked up (GraphOps::embedding_bf16).
  std::vector<uint16_t> token_embeddings_bf16;
  std::vector<float> position_embeddings;  // [positions, hidden] (GPT-2), empty with RoPE
  std::vector<DecoderLayerParams> layers;
  LayerNormParams final_norm;
  LinearParams lm_head;  // [vocab, hidden], no bias; a copy of the embeddings when tied
  // Set when the Linears were loaded deferred: their name and shape are filled, their weight and bias
  // empty, and this fills them from the checkpoint when the model builds that Linear (which then drops
  // them), so that a quantized model never holds every FP32 weight at once.
  std::function<void(LinearParams&)> load_linear;
};

// Reads every parameter as FP32 and checks each shape against the config; a missing tensor or a
// shape that disagrees is an error naming the tensor, its shape and the expected one. Each tensor's
// mapped pages are released once converted. defer_linears: the Linears' weights are read only when
// DecoderLM builds each one (DecoderParams::load_linear); the checkpoint must then outlive that.
DecoderParams load_decoder_params(const io::Checkpoint& checkpoint, const DecoderConfig& config,
                                  bool defer_linears = false);

}  // namespace qjoule::model

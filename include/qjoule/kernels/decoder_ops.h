// The non-GEMM operations of a decoder language model (Llama / Qwen2 / Qwen3 / GPT-2), in FP32 on the CPU,
// each with a scalar `_ref` twin that the tests hold it to.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qjoule::kernels {

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · gamma   (Llama's RMSNorm, FP32 throughout).
// out may equal x (in place).
void rms_norm_f32(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out);
void rms_norm_f32_ref(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out);

// The RMSNorm of every head of n rows, in place (Qwen3's q_norm / k_norm): row t of x starts at
// x + t·row_stride and holds `heads` heads of head_dim values one after another; each head is
// normalized over its head_dim values with gamma [head_dim], as rms_norm_f32 normalizes a row.
void head_rms_norm_f32(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim, const float* gamma,
                       float eps);
void head_rms_norm_f32_ref(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim, const float* gamma,
                           float eps);

// gate[i] = silu(gate[i]) · up[i] = gate[i] / (1 + exp(-gate[i])) · up[i], in place over n values (SwiGLU).
void silu_mul_f32(float* gate, const float* up, int64_t n);
void silu_mul_f32_ref(float* gate, const float* up, int64_t n);

// gate[i] = gelu_tanh(gate[i]) · up[i], in place over n values (GeGLU: Gemma's gelu_pytorch_tanh MLP).
void gelu_tanh_mul_f32(float* gate, const float* up, int64_t n);
void gelu_tanh_mul_f32_ref(float* gate, const float* up, int64_t n);

// GPT-2's "gelu_new": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in place.
void gelu_tanh_f32(float* x, int64_t n);
void gelu_tanh_f32_ref(float* x, int64_t n);

// config.json's rope_scaling, as Hugging Face transformers reads it.
struct RopeScaling {
  std::string type = "default";  // "default" (none), "linear", "llama3", "yarn", "longrope"
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn (defaults as in transformers' _compute_yarn_parameters)
  double beta_fast = 32.0, beta_slow = 1.0;
  double attention_factor = 0.0;  // 0: derived, 0.1·ln(factor) + 1 (yarn), sqrt(1 + ln f / ln original) (longrope)
  // longrope (Phi-3): one factor per frequency, below and above original_max_position_embeddings
  std::vector<double> short_factor, long_factor;
};

// The rotary table of one model: inv_freq[i] for i < head_dim/2 after scaling, and the factor that
// multiplies cos and sin (1 except for yarn). Unknown types ("dynamic" included: its frequencies depend
// on the sequence length, which a KV cache cannot follow) are an error naming the type.
struct RopeTable {
  int64_t head_dim = 0;
  std::vector<float> inv_freq;  // [head_dim / 2]
  float attention_factor = 1.0f;
};
// head_dim: the rotary dimension (a partial rotary factor's share of the head). long_factors: longrope's
// table for sequences beyond original_max_position_embeddings (transformers picks it per forward by the
// last position), else its short one; other types ignore it.
RopeTable make_rope_table(int64_t head_dim, double rope_theta, const RopeScaling& scaling, bool long_factors = false);

// Rotates q or k in place, Hugging Face's rotate_half convention (dimension i pairs with i + head_dim/2):
//   x'[i] = x[i]·cos − x[i+d/2]·sin,  x'[i+d/2] = x[i+d/2]·cos + x[i]·sin,  angle = pos · inv_freq[i]
// (cos and sin multiplied by attention_factor). x: [n_tokens, row_stride]; head h of token t occupies
// columns [h·head_dim, (h+1)·head_dim); token t is at position first_position + t.
void apply_rope_f32(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                    const RopeTable& table);
// The same with the table's rotary_dim / 2 frequencies as a pointer (no copy of the table); heads are head_dim
// apart and only their first rotary_dim values turn (a partial rotary factor: Phi-3); rotary_dim 0 = head_dim.
void apply_rope_f32(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                    const float* inv_freq, int64_t head_dim, float attention_factor, int64_t rotary_dim = 0);
void apply_rope_f32_ref(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t first_position,
                        const RopeTable& table);

// Causal self-attention of n_new tokens over a KV cache, with grouped-query attention.
// q: [n_new, q_stride], query head h in columns [h·head_dim, (h+1)·head_dim).
// k_cache, v_cache: [>= past + n_new, kv_stride]; rows [0, past + n_new) are valid (the new tokens'
// keys and values already written at rows past .. past+n_new-1); kv head g in columns [g·head_dim, ...).
// Query head h reads kv head h / (heads / kv_heads). New token t (position past + t) attends to cache
// rows 0 .. past + t; with a sliding `window` > 0 only rows past + t − window + 1 .. past + t (Hugging
// Face's sliding-window mask: position − key < window). ctx: [n_new, heads·head_dim] = softmax(q·kᵀ·scale)·v
// per head.
void causal_attention_f32(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                          int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, float scale, float* ctx, int64_t window = 0);
void causal_attention_f32_ref(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                              int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                              int64_t head_dim, float scale, float* ctx, int64_t window = 0);

// Row-wise log-softmax: out[r, :] = x[r, :] − logsumexp(x[r, :]) (double accumulation of the sum).
void log_softmax_f32(const float* x, int64_t rows, int64_t cols, float* out);

}  // namespace qjoule::kernels

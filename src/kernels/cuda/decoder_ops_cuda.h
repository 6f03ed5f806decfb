// The non-GEMM operations of a decoder language model on the GPU, compiled by nvcc
// (decoder_ops_cuda.cu): each the twin of a CPU operation in qjoule/kernels/decoder_ops.h, with the
// same arguments and the per-element arithmetic of qjoule/quant/element_math.h.
//
// As encoder_ops_cuda.h: every pointer is device memory; each call enqueues on `stream` and returns ""
// when the launch was accepted, else the error as one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct CUstream_st;

namespace qjoule::kernels::cuda_detail {

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · gamma; out may equal x. One block per row.
std::string rms_norm_cuda(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out,
                          CUstream_st* stream);
// x[r, :] += residual[r, :] (residual may be nullptr), then the RMSNorm of x into out; out may be x or
// the residual. One block per row, one pass to read and one to write (float4 where aligned).
std::string add_rms_norm_cuda(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                              float eps, float* out, CUstream_st* stream);
// The RMSNorm of each head of n rows, in place: row t at x + t·row_stride holds `heads` heads of head_dim
// values; gamma [head_dim] (kernels::head_rms_norm_f32: Qwen3's q_norm / k_norm). One block per head.
std::string head_rms_norm_cuda(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                               const float* gamma, float eps, CUstream_st* stream);
// out[r, i] = silu(gate_up[r, i]) · gate_up[r, cols + i] (a fused gate|up product's rows).
std::string silu_mul_rows_cuda(const float* gate_up, int64_t rows, int64_t cols, float* out, CUstream_st* stream);
// out[i, :] = bf16(word[ids[i], :]) · scale for i < rows: a BF16 embedding table read as stored
// (element::bf16_bits_to_f32). The ids must already lie in the vocabulary.
std::string embedding_bf16_cuda(const int32_t* ids, const uint16_t* word, float scale, int64_t rows, int64_t hidden,
                                float* out, CUstream_st* stream);

// out[r, i] = gelu_tanh(gate_up[r, i]) · gate_up[r, cols + i] (GeGLU, element::gelu_tanh).
std::string gelu_tanh_mul_rows_cuda(const float* gate_up, int64_t rows, int64_t cols, float* out, CUstream_st* stream);
// The n new tokens' keys and values into the caches at rows past .. past + n − 1 (past = *position when
// position is not null).
std::string store_kv_cuda(const float* k, const float* v, int64_t src_stride, float* k_cache, float* v_cache,
                          int64_t kv_stride, int64_t past, const int32_t* position, int64_t n, int64_t cols,
                          CUstream_st* stream);

// x[i] += y[i]; gate[i] = silu(gate[i]) · up[i] (element::silu_mul).
std::string add_cuda(float* x, const float* y, int64_t n, CUstream_st* stream);
// A mixture's weighted sum of its experts' rows: x[i] = α·y[i] (accumulate false) or x[i] += α·y[i], one
// FP32 product and one add as the CPU backend's GraphOps::add_scaled.
std::string add_scaled_cuda(float* x, const float* y, float alpha, int64_t n, bool accumulate, CUstream_st* stream);
std::string silu_mul_cuda(float* gate, const float* up, int64_t n, CUstream_st* stream);
// gate[i] = gelu_tanh(gate[i]) · up[i] (GeGLU).
std::string gelu_tanh_mul_cuda(float* gate, const float* up, int64_t n, CUstream_st* stream);

// Rotary embedding in place (element::rope_rotate per pair): x [n_tokens, row_stride], `heads` heads
// of 2·half columns, token t at first_position + t (first_position = *position when position is not
// null); inv_freq [half] on the device.
std::string rope_cuda(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t half, int64_t head_dim,
                      int64_t first_position, const int32_t* position, const float* inv_freq, float attention_factor,
                      CUstream_st* stream);

// rope_cuda over the q_heads + kv_heads heads of fused rows x [n_tokens, row_stride] = [q | k | v], then
// store_kv_cuda of their k and v parts (kv_heads · 2·half columns each) into the caches at rows past ..
// past + n_tokens − 1: one kernel, the same values as the two (past = *position when not null).
std::string rope_store_kv_cuda(float* x, int64_t n_tokens, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                               int64_t half, int64_t past, const int32_t* position, const float* inv_freq,
                               float attention_factor, float* k_cache, float* v_cache, int64_t kv_stride,
                               CUstream_st* stream);

// Causal grouped-query attention over a KV cache, causal_attention_f32's layout. One block of
// kAttentionThreads (encoder_ops_cuda.h) per (new token, head): q and the token's scores (past + t + 1
// of them) in shared memory, one warp per key, block-wide max and sum, one thread per channel for p·v.
// With `position` (device, not null) past = *position when the kernel runs, and the scores get room for
// max_keys (the cache's capacity). window > 0: each query reads its last `window` keys only.
std::string causal_attention_cuda(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                  int64_t kv_stride, int64_t past, const int32_t* position, int64_t max_keys,
                                  int64_t n_new, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale,
                                  float* ctx, int64_t window, CUstream_st* stream);

// ---- host helpers (no GPU needed) ---------------------------------------------------------------

// Dynamic shared memory one causal attention block needs: (head_dim + past + n_new) floats.
constexpr std::size_t causal_attention_shared_bytes(int64_t keys, int64_t head_dim) {
  return static_cast<std::size_t>(head_dim + keys) * sizeof(float);
}

}  // namespace qjoule::kernels::cuda_detail

// The non-GEMM operations of an encoder on the GPU, compiled by nvcc (encoder_ops_cuda.cu): each the
// twin of a CPU operation in qjoule/kernels/encoder_ops.h, with the same arguments and the same
// arithmetic (FP32, the _ref twins' expressions), so that tests compare them with the `_ref` twins.
//
// Every pointer is device memory. Each call enqueues its kernel on `stream` (nullptr: the default
// stream) and returns at once: "" when the launch was accepted, else the launch error as one line.
// Errors inside a kernel surface at the next synchronization. Errors are text, not exceptions, so
// that nvcc never parses fmt; the C++ callers turn them into qjoule::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace qjoule::kernels::cuda_detail {

// out[i, :] = word[ids[i], :] + position[i % seq, :] (when position is not nullptr: decoders without
// learned positions pass none) (+ token_type0[:] when not nullptr), for
// rows = batch · seq: the embedding sum of EncoderClassifier::forward (token type 0 for BERT). The ids
// must already be checked to lie in the vocabulary.
// first_position (device, may be nullptr): one i32 read when the kernel runs; the position rows then
// start at position + first_position · hidden (a recorded decode step's position).
std::string embedding_sum_cuda(const int32_t* ids, const float* word, const float* position,
                               const int32_t* first_position, const float* token_type0, int64_t rows, int64_t seq,
                               int64_t hidden, float* out, CUstream_st* stream);

// x[r, :] = LayerNorm(x[r, :] + residual[r, :]) · gamma + beta in place (residual may be nullptr):
// add_layer_norm_f32. One block per row; mean and variance in FP32 over two passes (the _ref twin
// sums in double), 1/sqrt(var + eps) as the twin.
std::string add_layer_norm_cuda(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                                const float* beta, float eps, CUstream_st* stream);

// In place: 0.5·x·(1 + erf(x/√2)) (gelu_erf_f32_ref, with CUDA's erff), max(x, 0) (relu_f32) and
// tanh (tanh_f32).
std::string gelu_erf_cuda(float* x, int64_t n, CUstream_st* stream);
std::string relu_cuda(float* x, int64_t n, CUstream_st* stream);
std::string tanh_cuda(float* x, int64_t n, CUstream_st* stream);
// In place: GPT-2's tanh GELU and the rounding to BF16, with the element math the CPU uses
// (qjoule/quant/element_math.h).
std::string gelu_tanh_cuda(float* x, int64_t n, CUstream_st* stream);
std::string round_to_bf16_cuda(float* x, int64_t n, CUstream_st* stream);

// Multi-head self-attention, attention_f32's layout: q, k, v [batch·seq, row_stride], head h in
// columns [h·head_dim, (h+1)·head_dim); ctx [batch·seq, heads·head_dim] = softmax(q·kᵀ/√head_dim)·v.
// mask [batch, seq] (1 = token, 0 = padding; nullptr = every key real): masked keys get probability 0.
// causal: query s sees keys 0..s only (decoders). A query with no visible key gets ctx 0, as the _ref
// twin. One block of kAttentionThreads per (query, head, sequence): q and the query's scores in
// shared memory, one warp per key for the scores, a block-wide max and sum for the softmax (exp via
// expf), then one thread per channel sums p·v and divides by the sum once.
inline constexpr int kAttentionThreads = 128;
std::string attention_cuda(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                           bool causal, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx,
                           CUstream_st* stream);

// ---- host helpers (no GPU needed) ---------------------------------------------------------------

// Dynamic shared memory one attention block needs: (head_dim + seq) floats.
constexpr std::size_t attention_shared_bytes(int64_t seq, int64_t head_dim) {
  return static_cast<std::size_t>(head_dim + seq) * sizeof(float);
}
// The most an attention block may ask for without opting in to more (48 KiB on every GPU).
inline constexpr std::size_t kAttentionMaxSharedBytes = 48 * 1024;

}  // namespace qjoule::kernels::cuda_detail

// The decoder's non-GEMM operations on the GPU (decoder_ops_cuda.h): RMSNorm, residual add, SwiGLU,
// RoPE and causal grouped-query attention over the KV cache. Simple kernels whose per-element
// arithmetic is the CPU's (qjoule/quant/element_math.h); none of them is tuned.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include "kernels/cuda/attend_query.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/decoder_ops_cuda.h"
#include "kernels/cuda/encoder_ops_cuda.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kElementThreads = 256;
constexpr int kNormThreads = 256;

__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* __restrict__ x, int64_t cols, const float* __restrict__ gamma, float eps, float* out) {
  __shared__ float scratch[32];
  const float* row = x + int64_t{blockIdx.x} * cols;
  float* o = out + int64_t{blockIdx.x} * cols;
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) squares = fmaf(row[c], row[c], squares);
  const float inv = rsqrtf(block_reduce(squares, Sum{}, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = row[c] * inv * gamma[c];
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) x[i] += y[i];
}

__global__ void silu_mul_kernel(float* __restrict__ gate, const float* __restrict__ up, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    gate[i] = element::silu_mul(gate[i], up[i]);
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t half,
                            int64_t first_position, const float* __restrict__ inv_freq, float factor) {
  const int64_t n = n_tokens * heads * half;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t i = idx % half, h = (idx / half) % heads, t = idx / (half * heads);
    float* head = x + t * row_stride + h * 2 * half;
    element::rope_rotate(head[i], head[i + half], first_position + t, inv_freq[i], factor);
  }
}

// Block (new token t, head h). Shared memory: q's head_dim values, then the past + t + 1 scores.
__global__ void __launch_bounds__(kAttentionThreads)
    causal_attention_kernel(const float* __restrict__ q, int64_t q_stride, const float* __restrict__ k_cache,
                            const float* __restrict__ v_cache, int64_t kv_stride, int64_t past, int64_t group,
                            int64_t head_dim, float scale, float* __restrict__ ctx, int64_t heads) {
  extern __shared__ float shared[];
  __shared__ float scratch[32];
  float* qs = shared;
  float* p = shared + head_dim;
  const int64_t t = blockIdx.x, h = blockIdx.y, g = h / group;
  const int64_t keys = past + t + 1;

  const float* q_row = q + t * q_stride + h * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q_row[d];
  __syncthreads();
  attend_query(
      qs, k_cache + g * head_dim, v_cache + g * head_dim, kv_stride, keys, head_dim, scale,
      [](int64_t) { return true; }, p, scratch, ctx + t * heads * head_dim + h * head_dim);
}

}  // namespace

std::string rms_norm_cuda(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out,
                          CUstream_st* stream) {
  if (rows <= 0 || cols <= 0) return {};
  if (rows > 0x7fffffff) return "rms_norm_kernel: " + std::to_string(rows) + " rows, at most 2^31 - 1";
  rms_norm_kernel<<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, cols, gamma, eps, out);
  return launch_error("rms_norm_kernel");
}

std::string add_cuda(float* x, const float* y, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  add_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, y, n);
  return launch_error("add_kernel");
}

std::string silu_mul_cuda(float* gate, const float* up, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  silu_mul_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(gate, up, n);
  return launch_error("silu_mul_kernel");
}

std::string rope_cuda(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t half,
                      int64_t first_position, const float* inv_freq, float attention_factor, CUstream_st* stream) {
  const int64_t n = n_tokens * heads * half;
  if (n <= 0) return {};
  rope_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, n_tokens, row_stride, heads, half,
                                                                            first_position, inv_freq, attention_factor);
  return launch_error("rope_kernel");
}

std::string causal_attention_cuda(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                  int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, float scale, float* ctx, CUstream_st* stream) {
  if (n_new <= 0 || heads <= 0) return {};
  if (kv_heads <= 0 || heads % kv_heads != 0)
    return "causal_attention_kernel: " + std::to_string(heads) + " query heads are not a multiple of " +
           std::to_string(kv_heads) + " kv heads";
  const std::size_t shared = causal_attention_shared_bytes(past + n_new, head_dim);
  if (shared > kAttentionMaxSharedBytes)
    return "causal_attention_kernel: " + std::to_string(past + n_new) + " keys + head_dim " + std::to_string(head_dim) +
           " need " + std::to_string(shared) + " bytes of shared memory, more than the " +
           std::to_string(kAttentionMaxSharedBytes) + " this kernel uses";
  if (n_new > 0x7fffffff || heads > 65535)
    return "causal_attention_kernel: grid (" + std::to_string(n_new) + " tokens, " + std::to_string(heads) +
           " heads) exceeds the CUDA grid limits (2^31 - 1, 65535)";
  const dim3 grid(static_cast<unsigned>(n_new), static_cast<unsigned>(heads));
  causal_attention_kernel<<<grid, kAttentionThreads, shared, stream>>>(q, q_stride, k_cache, v_cache, kv_stride, past,
                                                                       heads / kv_heads, head_dim, scale, ctx, heads);
  return launch_error("causal_attention_kernel");
}

}  // namespace qjoule::kernels::cuda_detail

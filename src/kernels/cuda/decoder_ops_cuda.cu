// The decoder's non-GEMM operations on the GPU (decoder_ops_cuda.h): RMSNorm, residual add, SwiGLU,
// RoPE, the KV cache store and causal grouped-query attention over the KV cache. Simple kernels whose
// per-element arithmetic is the CPU's (qjoule/quant/element_math.h). Those that take a position can
// read it from device memory (`position`, one i32, when not null) so that a recorded decode step (a
// CUDA graph) serves every position.
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

// One block per row. Pass 1: x (+= residual, written back) and the sum of squares, FP32; pass 2: the
// output. Each thread owns the same columns in both passes (float4 where the row allows), so it alone
// reads again what it wrote, and out may be x or the residual. With float4s, a thread keeps its first
// kNormCached values and their gammas in registers from pass 1 (every column of a row up to
// 4 · kNormCached · 256 = 4,096 wide): pass 2 reads no memory there, and the gammas arrive during the
// reduction.
constexpr int kNormCached = 4;

// Block b normalizes the `cols` values at (b / per_row) · row_stride + (b % per_row) · cols: a row of a
// [rows, cols] matrix (per_row 1, row_stride cols), or one head of a row of heads (head_rms_norm_cuda).
template <bool kVec>
__global__ void __launch_bounds__(kNormThreads)
    add_rms_norm_kernel(float* x, const float* residual, int64_t cols, const float* __restrict__ gamma, float eps,
                        float* out, int64_t per_row, int64_t row_stride) {
  __shared__ float scratch[32];
  const int64_t b = blockIdx.x;  // a row's norm (per_row 1) skips the 64-bit division of a head's
  const int64_t base = per_row == 1 ? b * row_stride : b / per_row * row_stride + b % per_row * cols;
  float squares = 0.0f;
  if constexpr (kVec) {
    float4* row = reinterpret_cast<float4*>(x + base);
    const float4* res = residual != nullptr ? reinterpret_cast<const float4*>(residual + base) : nullptr;
    const float4* g = reinterpret_cast<const float4*>(gamma);
    float4 kept[kNormCached], kept_gamma[kNormCached];
    for (int64_t c = threadIdx.x, j = 0; c < cols / 4; c += blockDim.x, ++j) {
      float4 v = row[c];
      if (res != nullptr) {
        const float4 r = res[c];
        v.x += r.x, v.y += r.y, v.z += r.z, v.w += r.w;
        row[c] = v;
      }
      squares = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, squares))));
#pragma unroll
      for (int t = 0; t < kNormCached; ++t)
        if (t == j) kept[t] = v, kept_gamma[t] = g[c];  // registers: t is a constant
    }
    const float inv = rsqrtf(block_reduce(squares, Sum{}, scratch) / static_cast<float>(cols) + eps);
    float4* o = reinterpret_cast<float4*>(out + base);
    for (int64_t c = threadIdx.x, j = 0; c < cols / 4; c += blockDim.x, ++j) {
      float4 v, gc;
      if (j < kNormCached) {
#pragma unroll
        for (int t = 0; t < kNormCached; ++t)
          if (t == j) v = kept[t], gc = kept_gamma[t];
      } else {
        v = row[c], gc = g[c];
      }
      o[c] = make_float4(v.x * inv * gc.x, v.y * inv * gc.y, v.z * inv * gc.z, v.w * inv * gc.w);
    }
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float v = x[base + c];
      if (residual != nullptr) {
        v += residual[base + c];
        x[base + c] = v;
      }
      squares = fmaf(v, v, squares);
    }
    const float inv = rsqrtf(block_reduce(squares, Sum{}, scratch) / static_cast<float>(cols) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[base + c] = x[base + c] * inv * gamma[c];
  }
}

// The gated activation of a GLU MLP: silu (SwiGLU) or gelu_tanh (GeGLU) of the gate, times up.
template <bool kGelu>
__device__ __forceinline__ float gated(float gate, float up) {
  if constexpr (kGelu) {
    return element::gelu_tanh(gate) * up;
  } else {
    return element::silu_mul(gate, up);
  }
}

// out[r, i] = act(gate_up[r, i]) · gate_up[r, cols + i].
template <bool kGelu>
__global__ void gated_mul_rows_kernel(const float* __restrict__ gate_up, int64_t rows, int64_t cols,
                                      float* __restrict__ out) {
  const int64_t n = rows * cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t r = idx / cols, i = idx - r * cols;
    out[idx] = gated<kGelu>(gate_up[r * 2 * cols + i], gate_up[r * 2 * cols + cols + i]);
  }
}

__global__ void embedding_bf16_kernel(const int32_t* __restrict__ ids, const uint16_t* __restrict__ word, float scale,
                                      int64_t rows, int64_t hidden, float* __restrict__ out) {
  const int64_t n = rows * hidden;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t r = idx / hidden, c = idx - r * hidden;
    out[idx] = element::bf16_bits_to_f32(word[int64_t{ids[r]} * hidden + c]) * scale;
  }
}

// cache[(past + t) · kv_stride + c] = src[t · src_stride + c] for the keys and the values; `past` from
// *position when it is not null.
__global__ void store_kv_kernel(const float* __restrict__ k, const float* __restrict__ v, int64_t src_stride,
                                float* __restrict__ k_cache, float* __restrict__ v_cache, int64_t kv_stride,
                                int64_t past, const int32_t* __restrict__ position, int64_t n, int64_t cols) {
  if (position != nullptr) past = *position;
  const int64_t total = n * cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t t = idx / cols, c = idx - t * cols;
    k_cache[(past + t) * kv_stride + c] = k[t * src_stride + c];
    v_cache[(past + t) * kv_stride + c] = v[t * src_stride + c];
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) x[i] += y[i];
}

// x[i] = α·y[i] (the first expert a token meets) or x[i] += α·y[i], as the CPU backend's loop writes it: one
// product, then one add (no FMA: __fmul_rn / __fadd_rn keep nvcc from contracting them).
__global__ void add_scaled_kernel(float* __restrict__ x, const float* __restrict__ y, float alpha, int64_t n,
                                  bool accumulate) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float scaled = __fmul_rn(alpha, y[i]);
    x[i] = accumulate ? __fadd_rn(x[i], scaled) : scaled;
  }
}

template <bool kGelu>
__global__ void gated_mul_kernel(float* __restrict__ gate, const float* __restrict__ up, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    gate[i] = gated<kGelu>(gate[i], up[i]);
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t half,
                            int64_t head_dim, int64_t first_position, const int32_t* __restrict__ position,
                            const float* __restrict__ inv_freq, float factor) {
  if (position != nullptr) first_position = *position;
  const int64_t n = n_tokens * heads * half;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t i = idx % half, h = (idx / half) % heads, t = idx / (half * heads);
    float* head = x + t * row_stride + h * head_dim;
    element::rope_rotate(head[i], head[i + half], first_position + t, inv_freq[i], factor);
  }
}

// One thread per (token, q or k head, pair) and per (token, value column): the pairs rotated in place as
// rope_kernel, a k head's two rotated values also written to the key cache, the values copied to the
// value cache, as store_kv_kernel.
__global__ void rope_store_kv_kernel(float* x, int64_t n_tokens, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                                     int64_t half, int64_t past, const int32_t* __restrict__ position,
                                     const float* __restrict__ inv_freq, float factor, float* __restrict__ k_cache,
                                     float* __restrict__ v_cache, int64_t kv_stride) {
  if (position != nullptr) past = *position;
  const int64_t heads = q_heads + kv_heads, kv_cols = kv_heads * 2 * half;
  const int64_t pairs = n_tokens * heads * half, n = pairs + n_tokens * kv_cols;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    if (idx < pairs) {
      const int64_t i = idx % half, h = (idx / half) % heads, t = idx / (half * heads);
      float* head = x + t * row_stride + h * 2 * half;
      element::rope_rotate(head[i], head[i + half], past + t, inv_freq[i], factor);
      if (h >= q_heads) {
        float* key = k_cache + (past + t) * kv_stride + (h - q_heads) * 2 * half;
        key[i] = head[i];
        key[i + half] = head[i + half];
      }
    } else {
      const int64_t e = idx - pairs, t = e / kv_cols, c = e - t * kv_cols;
      v_cache[(past + t) * kv_stride + c] = x[t * row_stride + heads * 2 * half + c];
    }
  }
}

// Block (new token t, head h). Shared memory: q's head_dim values, then the past + t + 1 scores.
__global__ void __launch_bounds__(kAttentionThreads)
    causal_attention_kernel(const float* __restrict__ q, int64_t q_stride, const float* __restrict__ k_cache,
                            const float* __restrict__ v_cache, int64_t kv_stride, int64_t past,
                            const int32_t* __restrict__ position, int64_t group, int64_t head_dim, float scale,
                            float* __restrict__ ctx, int64_t heads, int64_t window) {
  if (position != nullptr) past = *position;
  extern __shared__ float shared[];
  __shared__ float scratch[32];
  float* qs = shared;
  float* p = shared + head_dim;
  const int64_t t = blockIdx.x, h = blockIdx.y, g = h / group;
  // A sliding window reads the last `window` keys only: from row `first` of the cache.
  const int64_t first = window > 0 && past + t + 1 > window ? past + t + 1 - window : 0;
  const int64_t keys = past + t + 1 - first;

  const float* q_row = q + t * q_stride + h * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q_row[d];
  __syncthreads();
  attend_query(
      qs, k_cache + first * kv_stride + g * head_dim, v_cache + first * kv_stride + g * head_dim, kv_stride, keys,
      head_dim, scale, [](int64_t) { return true; }, p, scratch, ctx + t * heads * head_dim + h * head_dim);
}

}  // namespace

std::string add_rms_norm_cuda(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                              float eps, float* out, CUstream_st* stream) {
  if (rows <= 0 || cols <= 0) return {};
  if (rows > 0x7fffffff) return "add_rms_norm_kernel: " + std::to_string(rows) + " rows, at most 2^31 - 1";
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (cols % 4 == 0 && aligned(x) && aligned(out) && aligned(gamma) && (residual == nullptr || aligned(residual))) {
    add_rms_norm_kernel<true>
        <<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, residual, cols, gamma, eps, out, 1, cols);
  } else {
    add_rms_norm_kernel<false>
        <<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(x, residual, cols, gamma, eps, out, 1, cols);
  }
  return launch_error("add_rms_norm_kernel");
}

std::string head_rms_norm_cuda(float* x, int64_t n, int64_t row_stride, int64_t heads, int64_t head_dim,
                               const float* gamma, float eps, CUstream_st* stream) {
  if (n <= 0 || heads <= 0 || head_dim <= 0) return {};
  if (n * heads > 0x7fffffff) return "head_rms_norm: " + std::to_string(n * heads) + " heads, at most 2^31 - 1";
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const auto blocks = static_cast<unsigned>(n * heads);
  if (head_dim % 4 == 0 && row_stride % 4 == 0 && aligned(x) && aligned(gamma)) {
    add_rms_norm_kernel<true>
        <<<blocks, kNormThreads, 0, stream>>>(x, nullptr, head_dim, gamma, eps, x, heads, row_stride);
  } else {
    add_rms_norm_kernel<false>
        <<<blocks, kNormThreads, 0, stream>>>(x, nullptr, head_dim, gamma, eps, x, heads, row_stride);
  }
  return launch_error("add_rms_norm_kernel (heads)");
}

std::string rms_norm_cuda(const float* x, int64_t rows, int64_t cols, const float* gamma, float eps, float* out,
                          CUstream_st* stream) {
  // Without a residual the kernel writes nothing back to x.
  return add_rms_norm_cuda(const_cast<float*>(x), nullptr, rows, cols, gamma, eps, out, stream);
}

std::string silu_mul_rows_cuda(const float* gate_up, int64_t rows, int64_t cols, float* out, CUstream_st* stream) {
  if (rows <= 0 || cols <= 0) return {};
  gated_mul_rows_kernel<false>
      <<<grid_for(rows * cols, kElementThreads), kElementThreads, 0, stream>>>(gate_up, rows, cols, out);
  return launch_error("silu_mul_rows_kernel");
}

std::string embedding_bf16_cuda(const int32_t* ids, const uint16_t* word, float scale, int64_t rows, int64_t hidden,
                                float* out, CUstream_st* stream) {
  if (rows <= 0 || hidden <= 0) return {};
  embedding_bf16_kernel<<<grid_for(rows * hidden, kElementThreads), kElementThreads, 0, stream>>>(ids, word, scale,
                                                                                                  rows, hidden, out);
  return launch_error("embedding_bf16_kernel");
}

std::string gelu_tanh_mul_rows_cuda(const float* gate_up, int64_t rows, int64_t cols, float* out, CUstream_st* stream) {
  if (rows <= 0 || cols <= 0) return {};
  gated_mul_rows_kernel<true>
      <<<grid_for(rows * cols, kElementThreads), kElementThreads, 0, stream>>>(gate_up, rows, cols, out);
  return launch_error("gelu_tanh_mul_rows_kernel");
}

std::string store_kv_cuda(const float* k, const float* v, int64_t src_stride, float* k_cache, float* v_cache,
                          int64_t kv_stride, int64_t past, const int32_t* position, int64_t n, int64_t cols,
                          CUstream_st* stream) {
  if (n <= 0 || cols <= 0) return {};
  store_kv_kernel<<<grid_for(n * cols, kElementThreads), kElementThreads, 0, stream>>>(
      k, v, src_stride, k_cache, v_cache, kv_stride, past, position, n, cols);
  return launch_error("store_kv_kernel");
}

std::string add_cuda(float* x, const float* y, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  add_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, y, n);
  return launch_error("add_kernel");
}

std::string add_scaled_cuda(float* x, const float* y, float alpha, int64_t n, bool accumulate, CUstream_st* stream) {
  if (n <= 0) return {};
  add_scaled_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, y, alpha, n, accumulate);
  return launch_error("add_scaled_kernel");
}

std::string silu_mul_cuda(float* gate, const float* up, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  gated_mul_kernel<false><<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(gate, up, n);
  return launch_error("silu_mul_kernel");
}

std::string gelu_tanh_mul_cuda(float* gate, const float* up, int64_t n, CUstream_st* stream) {
  if (n <= 0) return {};
  gated_mul_kernel<true><<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(gate, up, n);
  return launch_error("gelu_tanh_mul_kernel");
}

std::string rope_cuda(float* x, int64_t n_tokens, int64_t row_stride, int64_t heads, int64_t half, int64_t head_dim,
                      int64_t first_position, const int32_t* position, const float* inv_freq, float attention_factor,
                      CUstream_st* stream) {
  const int64_t n = n_tokens * heads * half;
  if (n <= 0) return {};
  if (head_dim < 2 * half)
    return "rope_kernel: heads of " + std::to_string(head_dim) + " rotating " + std::to_string(2 * half) + " values";
  rope_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(
      x, n_tokens, row_stride, heads, half, head_dim, first_position, position, inv_freq, attention_factor);
  return launch_error("rope_kernel");
}

std::string rope_store_kv_cuda(float* x, int64_t n_tokens, int64_t row_stride, int64_t q_heads, int64_t kv_heads,
                               int64_t half, int64_t past, const int32_t* position, const float* inv_freq,
                               float attention_factor, float* k_cache, float* v_cache, int64_t kv_stride,
                               CUstream_st* stream) {
  const int64_t n = n_tokens * ((q_heads + kv_heads) * half + kv_heads * 2 * half);
  if (n <= 0) return {};
  rope_store_kv_kernel<<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(
      x, n_tokens, row_stride, q_heads, kv_heads, half, past, position, inv_freq, attention_factor, k_cache, v_cache,
      kv_stride);
  return launch_error("rope_store_kv_kernel");
}

std::string causal_attention_cuda(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                  int64_t kv_stride, int64_t past, const int32_t* position, int64_t max_keys,
                                  int64_t n_new, int64_t heads, int64_t kv_heads, int64_t head_dim, float scale,
                                  float* ctx, int64_t window, CUstream_st* stream) {
  if (n_new <= 0 || heads <= 0) return {};
  if (kv_heads <= 0 || heads % kv_heads != 0)
    return "causal_attention_kernel: " + std::to_string(heads) + " query heads are not a multiple of " +
           std::to_string(kv_heads) + " kv heads";
  // With the position read on the device, the scores get room for every key the cache can hold.
  int64_t keys = position != nullptr ? max_keys : past + n_new;
  if (window > 0 && keys > window) keys = window;  // a query reads at most the window's keys
  const std::size_t shared = causal_attention_shared_bytes(keys, head_dim);
  if (shared > kAttentionMaxSharedBytes)
    return "causal_attention_kernel: " + std::to_string(keys) + " keys + head_dim " + std::to_string(head_dim) +
           " need " + std::to_string(shared) + " bytes of shared memory, more than the " +
           std::to_string(kAttentionMaxSharedBytes) + " this kernel uses";
  if (n_new > 0x7fffffff || heads > 65535)
    return "causal_attention_kernel: grid (" + std::to_string(n_new) + " tokens, " + std::to_string(heads) +
           " heads) exceeds the CUDA grid limits (2^31 - 1, 65535)";
  const dim3 grid(static_cast<unsigned>(n_new), static_cast<unsigned>(heads));
  causal_attention_kernel<<<grid, kAttentionThreads, shared, stream>>>(
      q, q_stride, k_cache, v_cache, kv_stride, past, position, heads / kv_heads, head_dim, scale, ctx, heads, window);
  return launch_error("causal_attention_kernel");
}

}  // namespace qjoule::kernels::cuda_detail

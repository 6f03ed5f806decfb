// The encoder's non-GEMM operations on the GPU (encoder_ops_cuda.h): embedding sum, add + LayerNorm,
// GELU (erf), ReLU, tanh, and multi-head attention with the key padding mask (and optionally causal).
// Simple kernels that mirror the CPU _ref twins' arithmetic; none of them is tuned.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include "kernels/cuda/attend_query.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/encoder_ops_cuda.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kElementThreads = 256;
constexpr int kLayerNormThreads = 256;
constexpr float kInvSqrt2 = 0.70710678118654752440f;

// ---- kernels ----------------------------------------------------------------------------------------

__global__ void embedding_sum_kernel(const int32_t* __restrict__ ids, const float* __restrict__ word,
                                     const float* __restrict__ position, const int32_t* __restrict__ first_position,
                                     const float* __restrict__ token_type0, int64_t rows, int64_t seq, int64_t hidden,
                                     float* __restrict__ out) {
  const int64_t n = rows * hidden;
  if (position != nullptr && first_position != nullptr) position += int64_t{*first_position} * hidden;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t i = idx / hidden, c = idx - i * hidden;
    float v = word[int64_t{ids[i]} * hidden + c];
    if (position != nullptr) v = __fadd_rn(v, position[(i % seq) * hidden + c]);
    if (token_type0 != nullptr) v = __fadd_rn(v, token_type0[c]);
    out[idx] = v;
  }
}

// One block per row: each thread owns columns threadIdx.x, +blockDim.x, ... through all three passes,
// so the values it writes in pass 1 it alone reads again.
__global__ void __launch_bounds__(kLayerNormThreads)
    add_layer_norm_kernel(float* __restrict__ x, const float* __restrict__ residual, int64_t cols,
                          const float* __restrict__ gamma, const float* __restrict__ beta, float eps) {
  __shared__ float scratch[32];
  float* row = x + int64_t{blockIdx.x} * cols;
  const float* res = residual != nullptr ? residual + int64_t{blockIdx.x} * cols : nullptr;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    if (res != nullptr) {
      v = __fadd_rn(v, res[c]);
      row[c] = v;
    }
    sum += v;
  }
  const float mean = block_reduce(sum, Sum{}, scratch) / static_cast<float>(cols);
  float squares = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = row[c] - mean;
    squares = fmaf(d, d, squares);
  }
  const float var = block_reduce(squares, Sum{}, scratch) / static_cast<float>(cols);
  const float inv = 1.0f / sqrtf(var + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) row[c] = (row[c] - mean) * inv * gamma[c] + beta[c];
}

enum class Unary { gelu_erf, gelu_tanh, relu, tanh, round_bf16 };

template <Unary kOp>
__global__ void unary_kernel(float* __restrict__ x, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    if constexpr (kOp == Unary::gelu_erf) {
      x[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
    } else if constexpr (kOp == Unary::gelu_tanh) {
      x[i] = element::gelu_tanh(v);
    } else if constexpr (kOp == Unary::round_bf16) {
      x[i] = element::round_to_bf16(v);
    } else if constexpr (kOp == Unary::relu) {
      x[i] = v < 0.0f ? 0.0f : v;  // std::max(v, 0.0f): NaN stays NaN
    } else {
      x[i] = tanhf(v);
    }
  }
}

// Block (query s, head h, sequence b). Shared memory: q's head_dim values, then seq scores.
__global__ void __launch_bounds__(kAttentionThreads)
    attention_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                     int64_t row_stride, const int32_t* __restrict__ mask, int causal, int64_t seq, int64_t heads,
                     int64_t head_dim, float scale, float* __restrict__ ctx) {
  extern __shared__ float shared[];
  __shared__ float scratch[32];
  float* qs = shared;
  float* p = shared + head_dim;
  const int64_t s = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t first_row = b * seq;
  const int64_t column = h * head_dim;

  const float* q_row = q + (first_row + s) * row_stride + column;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) qs[d] = q_row[d];
  __syncthreads();
  attend_query(
      qs, k + first_row * row_stride + column, v + first_row * row_stride + column, row_stride, causal ? s + 1 : seq,
      head_dim, scale, [=](int64_t t) { return mask == nullptr || mask[first_row + t] != 0; }, p, scratch,
      ctx + (first_row + s) * heads * head_dim + column);
}

template <Unary kOp>
std::string unary(float* x, int64_t n, CUstream_st* stream, const char* name) {
  if (n <= 0) return {};
  unary_kernel<kOp><<<grid_for(n, kElementThreads), kElementThreads, 0, stream>>>(x, n);
  return launch_error(name);
}

}  // namespace

std::string embedding_sum_cuda(const int32_t* ids, const float* word, const float* position,
                               const int32_t* first_position, const float* token_type0, int64_t rows, int64_t seq,
                               int64_t hidden, float* out, CUstream_st* stream) {
  if (rows <= 0 || hidden <= 0) return {};
  if (seq <= 0) return "embedding_sum_kernel: sequence length " + std::to_string(seq) + ", expected at least 1";
  embedding_sum_kernel<<<grid_for(rows * hidden, kElementThreads), kElementThreads, 0, stream>>>(
      ids, word, position, first_position, token_type0, rows, seq, hidden, out);
  return launch_error("embedding_sum_kernel");
}

std::string add_layer_norm_cuda(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                                const float* beta, float eps, CUstream_st* stream) {
  if (rows <= 0 || cols <= 0) return {};
  if (rows > 0x7fffffff) return "add_layer_norm_kernel: " + std::to_string(rows) + " rows, at most 2^31 - 1";
  add_layer_norm_kernel<<<static_cast<unsigned>(rows), kLayerNormThreads, 0, stream>>>(x, residual, cols, gamma, beta,
                                                                                       eps);
  return launch_error("add_layer_norm_kernel");
}

std::string gelu_erf_cuda(float* x, int64_t n, CUstream_st* stream) {
  return unary<Unary::gelu_erf>(x, n, stream, "gelu_erf_kernel");
}
std::string relu_cuda(float* x, int64_t n, CUstream_st* stream) {
  return unary<Unary::relu>(x, n, stream, "relu_kernel");
}
std::string tanh_cuda(float* x, int64_t n, CUstream_st* stream) {
  return unary<Unary::tanh>(x, n, stream, "tanh_kernel");
}
std::string gelu_tanh_cuda(float* x, int64_t n, CUstream_st* stream) {
  return unary<Unary::gelu_tanh>(x, n, stream, "gelu_tanh_kernel");
}
std::string round_to_bf16_cuda(float* x, int64_t n, CUstream_st* stream) {
  return unary<Unary::round_bf16>(x, n, stream, "round_bf16_kernel");
}

std::string attention_cuda(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                           bool causal, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx,
                           CUstream_st* stream) {
  if (batch <= 0 || seq <= 0 || heads <= 0) return {};
  if (head_dim <= 0 || row_stride < heads * head_dim)
    return "attention_kernel: head_dim " + std::to_string(head_dim) + " × " + std::to_string(heads) +
           " heads does not fit a row stride of " + std::to_string(row_stride);
  const std::size_t shared = attention_shared_bytes(seq, head_dim);
  if (shared > kAttentionMaxSharedBytes)
    return "attention_kernel: sequence length " + std::to_string(seq) + " + head_dim " + std::to_string(head_dim) +
           " needs " + std::to_string(shared) + " bytes of shared memory, more than the " +
           std::to_string(kAttentionMaxSharedBytes) + " this kernel uses";
  if (seq > 0x7fffffff || heads > 65535 || batch > 65535)
    return "attention_kernel: grid (sequence " + std::to_string(seq) + ", heads " + std::to_string(heads) + ", batch " +
           std::to_string(batch) + ") exceeds the CUDA grid limits (2^31 - 1, 65535, 65535)";
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const dim3 grid(static_cast<unsigned>(seq), static_cast<unsigned>(heads), static_cast<unsigned>(batch));
  attention_kernel<<<grid, kAttentionThreads, shared, stream>>>(q, k, v, row_stride, mask, causal ? 1 : 0, seq, heads,
                                                                head_dim, scale, ctx);
  return launch_error("attention_kernel");
}

}  // namespace qjoule::kernels::cuda_detail

// One query's softmax attention over a run of keys, computed by one thread block: the body shared by
// the encoder's padding-mask attention (encoder_ops_cuda.cu) and the decoder's causal attention over
// the KV cache (decoder_ops_cuda.cu). Device code only.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/block_reduce.cuh"

namespace qjoule::kernels::cuda_detail {

// `qs`: the query's head_dim values, already in shared memory (and a barrier passed since). Keys and
// values: rows 0 .. keys-1 of `k` and `v` (this head's columns), `kv_stride` elements apart.
// visible(j): whether key j takes part (invisible keys get probability 0; a query with none gets 0).
// `p`: shared memory for `keys` scores; `scratch`: 32 floats of shared memory. Writes out[0, head_dim):
// softmax(q·kᵀ·scale)·v, one warp per key for the scores, one thread per channel for p·v.
template <class Visible>
__device__ void attend_query(const float* qs, const float* __restrict__ k, const float* __restrict__ v,
                             int64_t kv_stride, int64_t keys, int64_t head_dim, float scale, Visible visible, float* p,
                             float* scratch, float* __restrict__ out) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // Scores: every lane of a warp has the same j, so the shuffles are uniform.
  for (int64_t j = warp; j < keys; j += warps) {
    const bool seen = visible(j);
    float dot = 0.0f;
    if (seen) {
      const float* k_row = k + j * kv_stride;
      for (int64_t d = lane; d < head_dim; d += 32) dot = fmaf(qs[d], k_row[d], dot);
    }
    dot = warp_reduce(dot, Sum{});
    if (lane == 0) p[j] = seen ? dot * scale : -INFINITY;
  }
  __syncthreads();

  // Softmax numerator and its sum.
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) m = fmaxf(m, p[j]);
  m = block_reduce(m, Max{}, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x) {
    const float e = p[j] == -INFINITY ? 0.0f : expf(p[j] - m);
    p[j] = e;
    sum += e;
  }
  sum = block_reduce(sum, Sum{}, scratch);  // its barriers also publish p
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;

  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    const float* v_col = v + d;
    for (int64_t j = 0; j < keys; ++j) acc = fmaf(p[j], v_col[j * kv_stride], acc);
    out[d] = acc * inv;
  }
}

}  // namespace qjoule::kernels::cuda_detail

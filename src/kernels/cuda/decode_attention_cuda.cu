// Attention of one new token over the KV cache, split across blocks (flash-decoding), its grouped
// query heads sharing one read of their keys and values (decode_attention_cuda.h).
//
// decode_attention_split_kernel: block (kv head g, split s) loads keys and values s·chunk ..
// s·chunk + chunk − 1 of kv head g into shared memory once (rows padded by one float: no bank
// conflicts), scores them against the `group` query heads that read kv head g (dot · scale, as the CPU),
// and writes per head the split's max score m, Σ exp(score − m) and Σ exp(score − m) · v.
// decode_attention_combine_kernel: per head, the splits' parts rescaled to the largest m and summed,
// divided by the total: softmax(q·kᵀ·scale)·v, the twin's value up to summation order.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/decode_attention_cuda.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kThreads = 128;

// The first cache row a token at position `past` reads: the last `window` keys with a sliding window.
__device__ __forceinline__ int64_t first_key(int64_t past, int64_t window) {
  return window > 0 && past + 1 > window ? past + 1 - window : 0;
}

__global__ void __launch_bounds__(kThreads)
    decode_attention_split_kernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                                  const float* __restrict__ v_cache, int64_t kv_stride, int64_t past,
                                  const int32_t* __restrict__ position, int group, int head_dim, int chunk, float scale,
                                  float* __restrict__ partial, int splits, bool vec4, int64_t window) {
  extern __shared__ float shared[];
  const int hp = head_dim + 1;
  float* ks = shared;                 // [chunk][hp]
  float* vs = ks + chunk * hp;        // [chunk][hp]
  float* qs = vs + chunk * hp;        // [group][head_dim]
  float* ps = qs + group * head_dim;  // [group][chunk]
  if (position != nullptr) past = *position;
  const int64_t first = first_key(past, window);
  const int64_t keys = past + 1 - first;  // keys first .. past
  const int g = blockIdx.x, s = blockIdx.y;
  const int64_t j0 = int64_t{s} * chunk;  // of the keys read: cache row first + j0
  if (j0 >= keys) return;                 // beyond this step's keys: the combine reads only the splits that hold some
  const int nk = static_cast<int>(keys - j0 < chunk ? keys - j0 : chunk);
  if (vec4) {  // 16-byte loads; the padded rows take them as four stores
    const int quads = head_dim / 4;
    for (int idx = threadIdx.x; idx < nk * quads; idx += blockDim.x) {
      const int j = idx / quads, d = (idx - j * quads) * 4;
      const int64_t at = (first + j0 + j) * kv_stride + int64_t{g} * head_dim + d;
      const float4 kq = __ldg(reinterpret_cast<const float4*>(k_cache + at));
      const float4 vq = __ldg(reinterpret_cast<const float4*>(v_cache + at));
      float* kr = ks + j * hp + d;
      float* vr = vs + j * hp + d;
      kr[0] = kq.x, kr[1] = kq.y, kr[2] = kq.z, kr[3] = kq.w;
      vr[0] = vq.x, vr[1] = vq.y, vr[2] = vq.z, vr[3] = vq.w;
    }
  } else {
    for (int idx = threadIdx.x; idx < nk * head_dim; idx += blockDim.x) {
      const int j = idx / head_dim, d = idx - j * head_dim;
      const int64_t at = (first + j0 + j) * kv_stride + int64_t{g} * head_dim + d;
      ks[j * hp + d] = k_cache[at];
      vs[j * hp + d] = v_cache[at];
    }
  }
  for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x)
    qs[idx] = q[int64_t{g} * group * head_dim + idx];
  __syncthreads();
  for (int pair = threadIdx.x; pair < group * nk; pair += blockDim.x) {
    const int r = pair / nk, j = pair - r * nk;
    const float* qr = qs + r * head_dim;
    const float* kr = ks + j * hp;
    float dot = 0.0f;
    for (int d = 0; d < head_dim; ++d) dot = fmaf(qr[d], kr[d], dot);
    ps[r * chunk + j] = dot * scale;
  }
  __syncthreads();
  // Per head (one warp each): the split's max and the sum of exp(score − max).
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int r = warp; r < group; r += warps) {
    float m = -INFINITY;
    for (int j = lane; j < nk; j += 32) m = fmaxf(m, ps[r * chunk + j]);
    m = warp_reduce(m, Max{});
    float l = 0.0f;
    for (int j = lane; j < nk; j += 32) {
      const float e = expf(ps[r * chunk + j] - m);
      ps[r * chunk + j] = e;
      l += e;
    }
    l = warp_reduce(l, Sum{});
    if (lane == 0) {
      float* out = partial + (int64_t{g * group + r} * splits + s) * (head_dim + 2);
      out[0] = m;
      out[1] = l;
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * head_dim; idx += blockDim.x) {
    const int r = idx / head_dim, d = idx - r * head_dim;
    const float* pr = ps + r * chunk;
    float acc = 0.0f;
    for (int j = 0; j < nk; ++j) acc = fmaf(pr[j], vs[j * hp + d], acc);
    partial[(int64_t{g * group + r} * splits + s) * (head_dim + 2) + 2 + d] = acc;
  }
}

// Block h: ctx[h, :] from the splits that hold keys.
__global__ void decode_attention_combine_kernel(const float* __restrict__ partial, int64_t past,
                                                const int32_t* __restrict__ position, int head_dim, int chunk,
                                                int splits, float* __restrict__ ctx, int64_t window) {
  if (position != nullptr) past = *position;
  const int64_t keys = past + 1 - first_key(past, window);
  const int used = static_cast<int>((keys + chunk - 1) / chunk < splits ? (keys + chunk - 1) / chunk : splits);
  const float* base = partial + int64_t{blockIdx.x} * splits * (head_dim + 2);
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, base[int64_t{s} * (head_dim + 2)]);
  float total = 0.0f;
  for (int s = 0; s < used; ++s) {
    const float* p = base + int64_t{s} * (head_dim + 2);
    total += p[1] * expf(p[0] - m);
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int s = 0; s < used; ++s) {
      const float* p = base + int64_t{s} * (head_dim + 2);
      acc = fmaf(p[2 + d], expf(p[0] - m), acc);
    }
    ctx[int64_t{blockIdx.x} * head_dim + d] = acc * inv;
  }
}

}  // namespace

std::string decode_attention_cuda(const float* q, const float* k_cache, const float* v_cache, int64_t kv_stride,
                                  int64_t past, const int32_t* position, int64_t max_keys, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim, float scale, float* scratch,
                                  int64_t scratch_floats, float* ctx, int64_t window, CUstream_st* stream) {
  const DecodeAttentionPlan plan = decode_attention_plan(
      heads, kv_heads, head_dim, decode_attention_keys(past, position != nullptr, max_keys, window));
  if (!plan.fits) return "decode_attention: " + plan.why;
  if (scratch_floats < plan.scratch_floats)
    return "decode_attention: " + std::to_string(scratch_floats) + " floats of scratch, it needs " +
           std::to_string(plan.scratch_floats) + " (internal)";
  const dim3 grid(static_cast<unsigned>(kv_heads), static_cast<unsigned>(plan.splits));
  decode_attention_split_kernel<<<grid, kThreads, plan.shared_bytes, stream>>>(
      q, k_cache, v_cache, kv_stride, past, position, static_cast<int>(heads / kv_heads), static_cast<int>(head_dim),
      static_cast<int>(plan.chunk), scale, scratch, static_cast<int>(plan.splits),
      head_dim % 4 == 0 && kv_stride % 4 == 0 && reinterpret_cast<uintptr_t>(k_cache) % 16 == 0 &&
          reinterpret_cast<uintptr_t>(v_cache) % 16 == 0,
      window);
  if (std::string e = launch_error("decode_attention_split_kernel"); !e.empty()) return e;
  decode_attention_combine_kernel<<<static_cast<unsigned>(heads), 64, 0, stream>>>(
      scratch, past, position, static_cast<int>(head_dim), static_cast<int>(plan.chunk), static_cast<int>(plan.splits),
      ctx, window);
  return launch_error("decode_attention_combine_kernel");
}

}  // namespace qjoule::kernels::cuda_detail

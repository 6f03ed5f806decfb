// The 4-bit decode GEMVs (m ≤ kGemvMaxRows) over the planes of packed_planes.cuh: gemv_kernel (the
// default) and gemv_coalesced_kernel (QJOULE_CUDA_GEMV4=coalesced). Device code, included by
// linear_weight_only_cuda.cu alone.
#pragma once

#include <cstdint>

#include "kernels/cuda/packed_planes.cuh"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kGemvThreads = 128;
constexpr int kGemvRowsPerWarp = 2;
constexpr int kGemvRows = kGemvThreads / 32 * kGemvRowsPerWarp;  // output features per block

// The warp's sums: each (row, activation row) reduced across the lanes, lane 0 adding the bias and
// writing y[i, o] for i < m, o < out.
template <int M>
__device__ inline void store_rows(float (&acc)[kGemvRowsPerWarp][M], int lane, int64_t o0, int64_t m, int64_t out,
                                  const float* __restrict__ bias, float* __restrict__ y) {
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      const int64_t o = o0 + r;
      if (lane == 0 && i < m && o < out) y[i * out + o] = bias != nullptr ? v + bias[o] : v;
    }
  }
}

// y[i, o] = Σ_k x[i, k] · Ŵ[o, k] + b[o] for i < m ≤ M. Each warp owns kGemvRowsPerWarp rows; each lane
// reads 32 consecutive codes (16 bytes, one group's part: G ≥ 32) of each of them per step, the
// matching activations of every x row, and adds scale · Σ x · v; the warp reduces with shuffles.
template <class F, int M>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(Planar p, const float* __restrict__ x, int64_t m, int64_t out, int64_t in,
                const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float table[16];
  __shared__ float map[256];
  load_tables<F>(table, map);
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (int64_t{blockIdx.x} * (kGemvThreads / 32) + threadIdx.x / 32) * kGemvRowsPerWarp;
  if (o0 >= out) return;
  const int64_t row_bytes = in / 2;
  float acc[kGemvRowsPerWarp][M] = {};
  constexpr int kUnroll = 4;  // 4 × 1,024 codes of a row in flight: a 2,048- or 4,096-wide row in one round trip
  for (int64_t base = int64_t{lane} * 32; base < in; base += 32 * 32 * kUnroll) {
    uint4 q[kUnroll][kGemvRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = base + u * 32 * 32;
#pragma unroll
      for (int r = 0; r < kGemvRowsPerWarp; ++r) {
        const int64_t o = o0 + r < out ? o0 + r : out - 1;
        q[u][r] =
            k < in ? __ldg(reinterpret_cast<const uint4*>(p.codes + o * row_bytes + k / 2)) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = base + u * 32 * 32;
      if (k >= in) break;
      const int64_t g = k / F::kGroup;
      float s[kGemvRowsPerWarp], z[kGemvRowsPerWarp], dot[kGemvRowsPerWarp][M] = {};
#pragma unroll
      for (int r = 0; r < kGemvRowsPerWarp; ++r) {
        const int64_t o = o0 + r < out ? o0 + r : out - 1;
        s[r] = F::scale(p, o, g, map);
        z[r] = F::offset(p, o, g);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float v[kGemvRowsPerWarp][8];
#pragma unroll
        for (int r = 0; r < kGemvRowsPerWarp; ++r) {
          const uint32_t word = j == 0 ? q[u][r].x : j == 1 ? q[u][r].y : j == 2 ? q[u][r].z : q[u][r].w;
#pragma unroll
          for (int e = 0; e < 8; ++e) v[r][e] = F::value(nibble(word, e), z[r], table);
        }
#pragma unroll
        for (int i = 0; i < M; ++i) {
          if (i >= m) break;
          const float4 lo = __ldg(reinterpret_cast<const float4*>(x + i * in + k + 8 * j));
          const float4 hi = __ldg(reinterpret_cast<const float4*>(x + i * in + k + 8 * j + 4));
          const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int r = 0; r < kGemvRowsPerWarp; ++r)
#pragma unroll
            for (int e = 0; e < 8; ++e) dot[r][i] = fmaf(xv[e], v[r][e], dot[r][i]);
        }
      }
#pragma unroll
      for (int r = 0; r < kGemvRowsPerWarp; ++r)
#pragma unroll
        for (int i = 0; i < M; ++i) acc[r][i] = fmaf(dot[r][i], s[r], acc[r][i]);
    }
  }
  store_rows<M>(acc, lane, o0, m, out, bias, y);
}

// The same product with the activations' loads coalesced (QJOULE_CUDA_GEMV4=coalesced, not the default
// until a GPU has run it: see gemv4_coalesced_requested). Above, each lane's 32 activations are 128
// contiguous bytes, so every float4 load of them touches 32 cache lines across the warp (the 4-bit
// GEMV read at 0.16 of the copy bandwidth on an H200). Here lane L takes the words (8 codes, 4 bytes)
// 32·t + L (t < 4) of each step of 1,024 codes: its code loads are 4 bytes, 128 contiguous bytes a
// warp; its activation loads are 32 bytes apart across the warp (8 lines an instruction instead of 32).
// Each word's group scale is its own (a group of G ≥ 32 holds 4 or more whole words).
template <class F, int M>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_coalesced_kernel(Planar p, const float* __restrict__ x, int64_t m, int64_t out, int64_t in,
                          const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float table[16];
  __shared__ float map[256];
  load_tables<F>(table, map);
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (int64_t{blockIdx.x} * (kGemvThreads / 32) + threadIdx.x / 32) * kGemvRowsPerWarp;
  if (o0 >= out) return;
  const int64_t row_bytes = in / 2;
  float acc[kGemvRowsPerWarp][M] = {};
  constexpr int kWords = 4;   // words a lane takes per step of 1,024 codes
  constexpr int kUnroll = 4;  // steps in flight
  for (int64_t step0 = 0; step0 < in; step0 += 1024 * kUnroll) {
    uint32_t q[kUnroll][kWords][kGemvRowsPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < kWords; ++t) {
        const int64_t k = step0 + u * 1024 + 8 * (32 * t + lane);  // this word's first code
#pragma unroll
        for (int r = 0; r < kGemvRowsPerWarp; ++r) {
          const int64_t o = o0 + r < out ? o0 + r : out - 1;
          q[u][t][r] = k < in ? __ldg(reinterpret_cast<const unsigned int*>(p.codes + o * row_bytes + k / 2)) : 0u;
        }
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int t = 0; t < kWords; ++t) {
        const int64_t k = step0 + u * 1024 + 8 * (32 * t + lane);
        if (k >= in) continue;
        const int64_t g = k / F::kGroup;
        float v[kGemvRowsPerWarp][8], s[kGemvRowsPerWarp];
#pragma unroll
        for (int r = 0; r < kGemvRowsPerWarp; ++r) {
          const int64_t o = o0 + r < out ? o0 + r : out - 1;
          s[r] = F::scale(p, o, g, map);
          const float z = F::offset(p, o, g);
#pragma unroll
          for (int e = 0; e < 8; ++e) v[r][e] = F::value(nibble(q[u][t][r], e), z, table);
        }
#pragma unroll
        for (int i = 0; i < M; ++i) {
          if (i >= m) break;
          const float4 lo = __ldg(reinterpret_cast<const float4*>(x + i * in + k));
          const float4 hi = __ldg(reinterpret_cast<const float4*>(x + i * in + k + 4));
          const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
          for (int r = 0; r < kGemvRowsPerWarp; ++r) {
            float dot = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; ++e) dot = fmaf(xv[e], v[r][e], dot);
            acc[r][i] = fmaf(dot, s[r], acc[r][i]);
          }
        }
      }
  }
  store_rows<M>(acc, lane, o0, m, out, bias, y);
}

}  // namespace
}  // namespace qjoule::kernels::cuda_detail

// The 4-bit decode GEMVs (m ≤ kGemvMaxRows) over the planes of packed_planes.cuh: gemv_split_kernel (the
// default) and gemv_kernel (QJOULE_CUDA_GEMV4=plain, kept to compare). Device code, included by
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

// The same product split along the input dimension across a block's warps (QJOULE_CUDA_GEMV4=split):
// gemv_kernel keeps a 2,048-wide row's work in one warp, so a 1.1B model's 2,048-row products run 256
// warps, two an SM, each a long chain of dependent arithmetic (7-13 µs on an H100 for 2-12 MB), and its
// activation loads are 128 bytes a lane (32 cache lines a warp instruction). Here:
//  * a block of kSplitWarps warps owns kSplitRows rows; warp w takes the words (8 codes, 4 bytes)
//    256·s + 32·w + L (lane L, s = 0, 1, ...) of each row, so a 2,048-row product runs 4,096 warps;
//    code loads are 128 contiguous bytes a warp, activation loads 32 bytes apart (8 lines);
//  * every activation loaded serves the block's kSplitRows rows;
//  * F::values8 decodes a word: int4 puts each code in the mantissa of 2^23 (one byte permute) and
//    subtracts 2^23 + z (exactly c − z, without I2F, a quarter-rate instruction); nf4 reads its
//    table in shared memory.
// Each word's group scale is its own (a group of G ≥ 16 holds 2 or more whole words); the sum over a
// word's 8 codes is then scaled, as gemv_kernel scales a lane's 32. The warps' sums meet in shared
// memory and are added in warp order (the same order every run).
constexpr int kSplitThreads = 256;
constexpr int kSplitWarps = kSplitThreads / 32;
constexpr int kSplitRows = 4;   // output features per block
constexpr int kSplitWords = 4;  // words of each row a lane has in flight

// M = 1 (decode) is held to 64 registers: 4 blocks an SM, so that a 2,048-row product's 512 blocks run
// in one wave on 132 SMs.
template <class F, int M>
__global__ void __launch_bounds__(kSplitThreads, M == 1 ? 4 : 1)
    gemv_split_kernel(Planar p, const float* __restrict__ x, int64_t m, int64_t out, int64_t in,
                      const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float table[16];
  __shared__ float map[256];
  __shared__ float partial[kSplitWarps][kSplitRows][M];
  load_tables<F>(table, map);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t o0 = int64_t{blockIdx.x} * kSplitRows;
  const uint8_t* codes[kSplitRows];
  int64_t row[kSplitRows];
#pragma unroll
  for (int r = 0; r < kSplitRows; ++r) {
    row[r] = o0 + r < out ? o0 + r : out - 1;  // a row past `out` reads the last one; its sum is not written
    codes[r] = p.codes + row[r] * (in / 2);
  }
  const int64_t words = in / 8;
  float acc[kSplitRows][M] = {};
  for (int64_t j0 = int64_t{warp} * 32 + lane; j0 < words; j0 += int64_t{256} * kSplitWords) {
    uint32_t q[kSplitWords][kSplitRows];
#pragma unroll
    for (int s = 0; s < kSplitWords; ++s) {
      const int64_t j = j0 + 256 * s;
#pragma unroll
      for (int r = 0; r < kSplitRows; ++r)
        q[s][r] = j < words ? __ldg(reinterpret_cast<const unsigned int*>(codes[r]) + j) : 0u;
    }
#pragma unroll
    for (int s = 0; s < kSplitWords; ++s) {
      const int64_t j = j0 + 256 * s;
      if (j >= words) break;
      const int64_t k = 8 * j, g = k / F::kGroup;
      float xv[M][8];
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;
        const float4 lo = __ldg(reinterpret_cast<const float4*>(x + i * in + k));
        const float4 hi = __ldg(reinterpret_cast<const float4*>(x + i * in + k + 4));
        xv[i][0] = lo.x, xv[i][1] = lo.y, xv[i][2] = lo.z, xv[i][3] = lo.w;
        xv[i][4] = hi.x, xv[i][5] = hi.y, xv[i][6] = hi.z, xv[i][7] = hi.w;
      }
#pragma unroll
      for (int r = 0; r < kSplitRows; ++r) {
        const float scale = F::scale(p, row[r], g, map);
        float v[8];
        F::values8(q[s][r], F::word_offset(p, row[r], g), table, v);
#pragma unroll
        for (int i = 0; i < M; ++i) {
          if (i >= m) break;
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(xv[i][e], v[e], dot);
          acc[r][i] = fmaf(dot, scale, acc[r][i]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kSplitRows; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r][i] = v;
    }
  __syncthreads();
  if (threadIdx.x < kSplitRows * M) {
    const int r = threadIdx.x / M, i = threadIdx.x % M;
    const int64_t o = o0 + r;
    if (i < m && o < out) {
      float v = partial[0][r][i];
#pragma unroll
      for (int w = 1; w < kSplitWarps; ++w) v += partial[w][r][i];
      y[i * out + o] = bias != nullptr ? v + bias[o] : v;
    }
  }
}

}  // namespace
}  // namespace qjoule::kernels::cuda_detail

// Decode-sized products (m ≤ kDenseGemvMaxRows) of the dense layers without cuBLASLt: one kernel that
// reads each weight row once with 128-bit loads and takes FP32 activations as they are, so that no
// conversion or quantization kernel runs beside it (gemv_dense_cuda.h).
//
// Each warp owns kRowsPerWarp consecutive output rows; each lane loads 16 bytes of each of them per
// step (4 FP32, 8 FP16 / BF16 or 16 INT8 weights), kUnroll steps (INT8: kUnrollS8) in flight at once;
// the warp reduces with shuffles. FP32 reads its activations from L1 / L2 (a lane's 4 are the warp's
// next 16 bytes: coalesced). FP16, BF16 and INT8 first stage 2,048 columns of x at a time in shared
// memory in the form their products take (each activation rounded or quantized once per block, not
// once per warp; a lane's 8 or 16 activations read as one conflict-free 16-byte load), the block's
// weight loads for those columns already in flight. (Splitting a row's columns across a block's warps,
// for more warps at the 2,048-row shapes, measured no faster: INT8 3-12% slower on an H100.)
// The numerics are the format's, as the cuBLASLt path computes them:
//   f32   FP32 FMAs;
//   f16 / bf16   each activation rounded to FP16 / BF16 (round to nearest even, as convert_kernel), the
//         products and their sum in FP32;
//   s8    the per-token codes of quantize_rows_kernel (scale max|x| / 127, element::s8_code; a row with a
//         NaN or Inf gets the scale NaN), exact INT32 sums through __dp4a, then dequantize_kernel's
//         expression float(acc) · (s_x · s_w) + b: bit for bit the cuBLASLt path's result.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemv_dense_cuda.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = 2;
// 16-byte loads in flight per lane and row: a 2,048-wide FP16 row is one round trip (8 steps of 256).
constexpr int kUnroll = 8;
constexpr int kUnrollS8 = 4;
// The staged kernels (f16, bf16, s8): 8 warps a block share one copy of the staged activations.
constexpr int kStagedThreads = 256;
constexpr int kStagedWarps = kStagedThreads / 32;
constexpr int kStageCols = 2048;  // = 32 lanes × 8 FP16 × kUnroll = 32 lanes × 16 INT8 × kUnrollS8

// Elements of type T in 16 bytes, and their dot product with the FP32 activations a[0 .. V).
template <class T>
struct Elem;
template <>
struct Elem<float> {
  static constexpr int V = 4;
  __device__ static float dot(const uint4& w, const float* a) {
    return fmaf(__uint_as_float(w.w), a[3],
                fmaf(__uint_as_float(w.z), a[2], fmaf(__uint_as_float(w.y), a[1], __uint_as_float(w.x) * a[0])));
  }
};
template <>
struct Elem<__half> {
  static constexpr int V = 8;
  __device__ static unsigned short bits(float v) { return __half_as_ushort(__float2half_rn(v)); }
  __device__ static float from_bits(unsigned short b) { return __half2float(__ushort_as_half(b)); }
  __device__ static float dot(const uint4& w, const float* a) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[j]));
      s = fmaf(f.x, a[2 * j], s);
      s = fmaf(f.y, a[2 * j + 1], s);
    }
    return s;
  }
};
template <>
struct Elem<__nv_bfloat16> {
  static constexpr int V = 8;
  __device__ static unsigned short bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
  __device__ static float from_bits(unsigned short b) { return __uint_as_float(uint32_t{b} << 16); }
  __device__ static float dot(const uint4& w, const float* a) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s = fmaf(__uint_as_float(words[j] << 16), a[2 * j], s);
      s = fmaf(__uint_as_float(words[j] & 0xffff0000u), a[2 * j + 1], s);
    }
    return s;
  }
};

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ inline int warp_sum(int v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The 16 bytes at columns base + u·step (u < U) of the warp's rows o0 .. o0 + kRowsPerWarp − 1, every
// load issued before any is used. A row past `out` reads the last row (its sums are not written), a
// step past `in` reads zeros.
template <int U, class T>
__device__ inline void load_steps(const T* __restrict__ w, int64_t ld, int64_t o0, int64_t out, int64_t base,
                                  int64_t step, int64_t in, uint4 (&wv)[U][kRowsPerWarp]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t k = base + u * step;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t o = o0 + r < out ? o0 + r : out - 1;
      wv[u][r] = k < in ? __ldg(reinterpret_cast<const uint4*>(w + o * ld + k)) : make_uint4(0, 0, 0, 0);
    }
  }
}

// FP32: y[i, o] = Σ_k x[i, k] · W[o, k] + b[o] for i < m ≤ M; W [>= out, ld] row-major.
template <int M>
__global__ void __launch_bounds__(kThreads)
    gemv_f32_kernel(const float* __restrict__ w, int64_t ld, const float* __restrict__ x, int64_t m, int64_t out,
                    int64_t in, const float* __restrict__ bias, float* __restrict__ y) {
  constexpr int V = Elem<float>::V;
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (int64_t{blockIdx.x} * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  if (o0 >= out) return;
  float acc[kRowsPerWarp][M] = {};
  const int64_t step = int64_t{32} * V;
  for (int64_t base = int64_t{lane} * V; base < in; base += step * kUnroll) {
    uint4 wv[kUnroll][kRowsPerWarp];
    load_steps(w, ld, o0, out, base, step, in, wv);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t k = base + u * step;
      if (k >= in) break;
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;
        const float4 f = __ldg(reinterpret_cast<const float4*>(x + i * in + k));
        const float a[V] = {f.x, f.y, f.z, f.w};
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][i] += Elem<float>::dot(wv[u][r], a);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = warp_sum(acc[r][i]);
      const int64_t o = o0 + r;
      if (lane == 0 && i < m && o < out) y[i * out + o] = bias != nullptr ? v + bias[o] : v;
    }
  }
}

// FP16 / BF16: y[i, o] = Σ_k round_T(x[i, k]) · W[o, k] + b[o] for i < m ≤ M, the rounded activations
// staged in shared memory kStageCols columns at a time. Every warp stages; warps past `out` compute
// nothing. Lane L takes columns 8·L .. 8·L + 7 of each 256 in a step, summed in order, then the warp.
template <class T, int M>
__global__ void __launch_bounds__(kStagedThreads)
    gemv_half_staged_kernel(const T* __restrict__ w, int64_t ld, const float* __restrict__ x, int64_t m, int64_t out,
                            int64_t in, const float* __restrict__ bias, float* __restrict__ y) {
  constexpr int V = Elem<T>::V;
  static_assert(32 * V * kUnroll == kStageCols, "one unrolled step covers the staged columns");
  __shared__ __align__(16) unsigned short xs[M][kStageCols];
  const int lane = threadIdx.x % 32;
  const int64_t o0 = (int64_t{blockIdx.x} * kStagedWarps + threadIdx.x / 32) * kRowsPerWarp;
  const bool active = o0 < out;
  float acc[kRowsPerWarp][M] = {};
  for (int64_t c0 = 0; c0 < in; c0 += kStageCols) {
    uint4 wv[kUnroll][kRowsPerWarp];
    if (active) load_steps(w, ld, o0, out, c0 + int64_t{lane} * V, int64_t{32} * V, in, wv);
    __syncthreads();  // the previous columns' reads are done
    for (int idx = threadIdx.x; idx < M * (kStageCols / 8); idx += kStagedThreads) {
      const int i = idx / (kStageCols / 8), c = (idx % (kStageCols / 8)) * 8;
      if (i >= m || c0 + c >= in) continue;
      const float4 lo = __ldg(reinterpret_cast<const float4*>(x + i * in + c0 + c));
      const float4 hi = __ldg(reinterpret_cast<const float4*>(x + i * in + c0 + c + 4));
      const auto pair = [](float a, float b) {
        return uint32_t{Elem<T>::bits(a)} | (uint32_t{Elem<T>::bits(b)} << 16);
      };
      *reinterpret_cast<uint4*>(&xs[i][c]) =
          make_uint4(pair(lo.x, lo.y), pair(lo.z, lo.w), pair(hi.x, hi.y), pair(hi.z, hi.w));
    }
    __syncthreads();
    if (!active) continue;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = u * 32 * V + lane * V;
      if (c0 + c >= in) break;
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;
        const uint4 xv = *reinterpret_cast<const uint4*>(&xs[i][c]);
        const uint32_t words[4] = {xv.x, xv.y, xv.z, xv.w};
        float a[V];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          a[2 * j] = Elem<T>::from_bits(static_cast<unsigned short>(words[j] & 0xffffu));
          a[2 * j + 1] = Elem<T>::from_bits(static_cast<unsigned short>(words[j] >> 16));
        }
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) acc[r][i] += Elem<T>::dot(wv[u][r], a);
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = warp_sum(acc[r][i]);
      const int64_t o = o0 + r;
      if (lane == 0 && i < m && o < out) y[i * out + o] = bias != nullptr ? v + bias[o] : v;
    }
  }
}

// Four activation codes packed as one dp4a operand.
__device__ inline int pack_codes(float a, float b, float c, float d, float inv) {
  const auto byte = [inv](float v) { return static_cast<uint32_t>(element::s8_code(v, inv)) & 0xffu; };
  return static_cast<int>(byte(a) | (byte(b) << 8) | (byte(c) << 16) | (byte(d) << 24));
}

// W8A8: the codes of x [m, in] computed in the kernel (every block finds each row's scale, then stages
// the codes kStageCols columns at a time in shared memory), exact INT32 sums, the cuBLASLt path's
// epilogue. W [>= out, ld] s8, row_scales [>= out].
template <int M>
__global__ void __launch_bounds__(kStagedThreads)
    gemv_s8_kernel(const int8_t* __restrict__ w, int64_t ld, const float* __restrict__ row_scales,
                   const float* __restrict__ x, int64_t m, int64_t out, int64_t in, const float* __restrict__ bias,
                   float* __restrict__ y) {
  constexpr int V = 16;
  static_assert(32 * V * kUnrollS8 == kStageCols, "one unrolled step covers the staged columns");
  __shared__ float warp_max[kStagedWarps][M];
  __shared__ int warp_ok[kStagedWarps][M];
  __shared__ __align__(16) int8_t xs[M][kStageCols];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t o0 = (int64_t{blockIdx.x} * kStagedWarps + warp) * kRowsPerWarp;
  const bool active = o0 < out;
  uint4 wv[kUnrollS8][kRowsPerWarp];
  // The first columns' weights are in flight while the scales are found.
  if (active) load_steps(w, ld, o0, out, int64_t{lane} * V, int64_t{32} * V, in, wv);
    // Each row's max |x| and whether it is finite, over the whole block (quantize_rows_kernel's scale).
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float a = 0.0f;
    int ok = 1;
    if (i < m) {
      for (int64_t k = threadIdx.x * 4; k < in; k += kStagedThreads * 4) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(x + i * in + k));
        ok &= isfinite(f.x) && isfinite(f.y) && isfinite(f.z) && isfinite(f.w);
        a = fmaxf(a, fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w))));
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, offset));
      ok &= __shfl_xor_sync(0xffffffffu, ok, offset);
    }
    if (lane == 0) warp_max[warp][i] = a, warp_ok[warp][i] = ok;
  }
  __syncthreads();
  float inv[M], sx[M];
#pragma unroll
  for (int i = 0; i < M; ++i) {
    float a = 0.0f;
    int ok = 1;
    for (int v = 0; v < kStagedWarps; ++v) a = fmaxf(a, warp_max[v][i]), ok &= warp_ok[v][i];
    element::symmetric_scales(a, 127.0f, inv[i], sx[i]);
    if (!ok) sx[i] = __int_as_float(0x7fc00000);
  }

  int acc[kRowsPerWarp][M] = {};
  for (int64_t c0 = 0; c0 < in; c0 += kStageCols) {
    if (active && c0 > 0) load_steps(w, ld, o0, out, c0 + int64_t{lane} * V, int64_t{32} * V, in, wv);
    __syncthreads();  // the previous columns' reads are done
    for (int idx = threadIdx.x; idx < M * (kStageCols / 16); idx += kStagedThreads) {
      const int i = idx / (kStageCols / 16), c = (idx % (kStageCols / 16)) * 16;
      if (i >= m || c0 + c >= in) continue;
      int codes[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 f = __ldg(reinterpret_cast<const float4*>(x + i * in + c0 + c + 4 * j));
        codes[j] = pack_codes(f.x, f.y, f.z, f.w, inv[i]);
      }
      *reinterpret_cast<int4*>(&xs[i][c]) = make_int4(codes[0], codes[1], codes[2], codes[3]);
    }
    __syncthreads();
    if (!active) continue;
#pragma unroll
    for (int u = 0; u < kUnrollS8; ++u) {
      const int c = u * 32 * V + lane * V;
      if (c0 + c >= in) break;
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;
        const int4 codes = *reinterpret_cast<const int4*>(&xs[i][c]);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          const uint4 q = wv[u][r];
          int s = acc[r][i];
          s = __dp4a(static_cast<int>(q.x), codes.x, s);
          s = __dp4a(static_cast<int>(q.y), codes.y, s);
          s = __dp4a(static_cast<int>(q.z), codes.z, s);
          s = __dp4a(static_cast<int>(q.w), codes.w, s);
          acc[r][i] = s;
        }
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const int sum = warp_sum(acc[r][i]);
      const int64_t o = o0 + r;
      if (lane == 0 && i < m && o < out) {
        float v = __fmul_rn(__int2float_rn(sum), __fmul_rn(sx[i], row_scales[o]));
        if (bias != nullptr) v = __fadd_rn(v, bias[o]);
        y[i * out + o] = v;
      }
    }
  }
}

template <class T>
void launch_half(const void* w, int64_t ld, const float* x, int64_t m, int64_t out, int64_t in, const float* bias,
                 float* y, cudaStream_t s) {
  const T* wt = static_cast<const T*>(w);
  const auto grid = static_cast<unsigned>((out + kStagedWarps * kRowsPerWarp - 1) / (kStagedWarps * kRowsPerWarp));
  if (m == 1) {
    gemv_half_staged_kernel<T, 1><<<grid, kStagedThreads, 0, s>>>(wt, ld, x, m, out, in, bias, y);
  } else {
    gemv_half_staged_kernel<T, kDenseGemvMaxRows><<<grid, kStagedThreads, 0, s>>>(wt, ld, x, m, out, in, bias, y);
  }
}

}  // namespace

std::string gemv_dense_cuda(GemmKind kind, const void* w, int64_t ld, const float* row_scales, const float* x,
                            int64_t m, int64_t out, int64_t in, const float* bias, float* y, CUstream_st* stream) {
  if (!dense_gemv_applies(kind, m, in)) return "gemv_dense_cuda: this format or shape has no GEMV (internal)";
  if ((out + kWarps * kRowsPerWarp - 1) / (kWarps * kRowsPerWarp) > 0x7fffffff)
    return "gemv_dense_cuda: too many output rows";
  switch (kind) {
    case GemmKind::f32: {
      const float* w32 = static_cast<const float*>(w);
      const auto grid = static_cast<unsigned>((out + kWarps * kRowsPerWarp - 1) / (kWarps * kRowsPerWarp));
      if (m == 1) {
        gemv_f32_kernel<1><<<grid, kThreads, 0, stream>>>(w32, ld, x, m, out, in, bias, y);
      } else {
        gemv_f32_kernel<kDenseGemvMaxRows><<<grid, kThreads, 0, stream>>>(w32, ld, x, m, out, in, bias, y);
      }
      break;
    }
    case GemmKind::f16: launch_half<__half>(w, ld, x, m, out, in, bias, y, stream); break;
    case GemmKind::bf16: launch_half<__nv_bfloat16>(w, ld, x, m, out, in, bias, y, stream); break;
    case GemmKind::s8: {
      const int8_t* w8 = static_cast<const int8_t*>(w);
      const auto grid = static_cast<unsigned>((out + kStagedWarps * kRowsPerWarp - 1) / (kStagedWarps * kRowsPerWarp));
      if (m == 1) {
        gemv_s8_kernel<1><<<grid, kStagedThreads, 0, stream>>>(w8, ld, row_scales, x, m, out, in, bias, y);
      } else {
        gemv_s8_kernel<kDenseGemvMaxRows>
            <<<grid, kStagedThreads, 0, stream>>>(w8, ld, row_scales, x, m, out, in, bias, y);
      }
      break;
    }
    default: return "gemv_dense_cuda: this format has no GEMV (internal)";
  }
  return launch_error("gemv_dense_cuda");
}

}  // namespace qjoule::kernels::cuda_detail

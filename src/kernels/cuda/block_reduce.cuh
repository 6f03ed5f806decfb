// Warp and block reductions shared by the element-wise and attention kernels (encoder_ops_cuda.cu,
// decoder_ops_cuda.cu). Device code only.
#pragma once

namespace qjoule::kernels::cuda_detail {

// ---- block reductions (blockDim.x a multiple of 32, at most 1024) -----------------------------------

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class Op>
__device__ float warp_reduce(float v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread gets the block's reduction; `scratch` holds 32 floats of shared memory, free again on
// return (the second barrier).
template <class Op>
__device__ float block_reduce(float v, Op op, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_reduce(v, op);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

}  // namespace qjoule::kernels::cuda_detail

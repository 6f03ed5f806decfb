// The device side of the GPU benchmark helpers (qjoule/kernels/cuda_gemm_bench.h), compiled by nvcc.
// Times are per repetition, in milliseconds, measured with CUDA events on the default stream after
// warm-up runs; errors come back as text (empty on success).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/linear_cuda_device.h"

namespace qjoule::kernels::cuda_detail {

// One cuBLASLt product D[m, n] = B[m, k] · A[n, k]ᵀ of `kind` on GPU `device`, on uniform random
// operands in [-1, 1) (INT8: codes in [-127, 127]) generated on the device; the matrix product alone.
std::string bench_gemm(GemmKind kind, int64_t m, int64_t n, int64_t k, int reps, int device, std::vector<float>& ms);

// cudaMemcpyAsync of `bytes` from one device buffer to another.
std::string bench_copy(std::size_t bytes, int reps, int device, std::vector<float>& ms);

// Repetition r runs `calls` forwards back to back, layers[(r · calls + c) % layers.size()]->forward(x, m,
// y) for c < calls, all layers [out, in], x random; ms[r] is the repetition's time / calls.
std::string bench_forward(const std::vector<DeviceLinear*>& layers, int64_t in, int64_t out, int64_t m, int reps,
                          int calls, int device, std::vector<float>& ms);

}  // namespace qjoule::kernels::cuda_detail

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <functional>

#include "kernels/cuda/cuda_bench_device.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/lt_gemm.cuh"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kWarmup = 3;

// A uniform value in [-1, 1) from element index i and a seed (splitmix64).
__device__ inline float uniform(uint64_t i, uint32_t seed) {
  uint64_t z = i + 0x9e3779b97f4a7c15ull * (uint64_t{seed} + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<uint32_t>(z >> 40)) * (2.0f / 16777216.0f) - 1.0f;
}

template <class T>
__device__ inline T encode(float u);
template <>
__device__ inline float encode<float>(float u) {
  return u;
}
template <>
__device__ inline __half encode<__half>(float u) {
  return __float2half_rn(u);
}
template <>
__device__ inline __nv_bfloat16 encode<__nv_bfloat16>(float u) {
  return __float2bfloat16_rn(u);
}
template <>
__device__ inline int8_t encode<int8_t>(float u) {
  return static_cast<int8_t>(rintf(u * 127.0f));
}
template <>
__device__ inline __nv_fp8_storage_t encode<__nv_fp8_storage_t>(float u) {
  return __nv_cvt_float_to_fp8(u, __NV_SATFINITE, __NV_E4M3);
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, uint32_t seed) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    p[i] = encode<T>(uniform(static_cast<uint64_t>(i), seed));
}

template <class T>
std::string fill(void* p, int64_t n, uint32_t seed) {
  fill_kernel<T><<<4096, 256>>>(static_cast<T*>(p), n, seed);
  return launch_error("fill_kernel");
}

std::string fill_kind(GemmKind kind, void* p, int64_t n, uint32_t seed) {
  switch (kind) {
    case GemmKind::f32:
    case GemmKind::tf32: return fill<float>(p, n, seed);
    case GemmKind::f16: return fill<__half>(p, n, seed);
    case GemmKind::bf16: return fill<__nv_bfloat16>(p, n, seed);
    case GemmKind::s8: return fill<int8_t>(p, n, seed);
    case GemmKind::e4m3: return fill<__nv_fp8_storage_t>(p, n, seed);
  }
  return "unknown GEMM kind";
}

// Events destroyed on every path.
struct Events {
  std::vector<cudaEvent_t> start, stop;
  ~Events() {
    for (cudaEvent_t e : start) cudaEventDestroy(e);
    for (cudaEvent_t e : stop) cudaEventDestroy(e);
  }
};

// kWarmup untimed calls of body, then `reps` calls each between two events on the default stream.
std::string time_reps(int reps, const std::function<std::string(int)>& body, std::vector<float>& ms) {
  for (int r = 0; r < kWarmup; ++r)
    if (std::string e = body(r); !e.empty()) return e;
  Events ev;
  ev.start.resize(static_cast<std::size_t>(reps), nullptr);
  ev.stop.resize(static_cast<std::size_t>(reps), nullptr);
  for (int r = 0; r < reps; ++r) {
    cudaError_t err = cudaEventCreate(&ev.start[static_cast<std::size_t>(r)]);
    if (err == cudaSuccess) err = cudaEventCreate(&ev.stop[static_cast<std::size_t>(r)]);
    if (err != cudaSuccess) return describe(err, "cudaEventCreate");
  }
  for (int r = 0; r < reps; ++r) {
    cudaError_t err = cudaEventRecord(ev.start[static_cast<std::size_t>(r)], nullptr);
    if (err != cudaSuccess) return describe(err, "cudaEventRecord");
    if (std::string e = body(r); !e.empty()) return e;
    err = cudaEventRecord(ev.stop[static_cast<std::size_t>(r)], nullptr);
    if (err != cudaSuccess) return describe(err, "cudaEventRecord");
  }
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return describe(err, "the timed work");
  ms.assign(static_cast<std::size_t>(reps), 0.0f);
  for (int r = 0; r < reps; ++r) {
    err = cudaEventElapsedTime(&ms[static_cast<std::size_t>(r)], ev.start[static_cast<std::size_t>(r)],
                               ev.stop[static_cast<std::size_t>(r)]);
    if (err != cudaSuccess) return describe(err, "cudaEventElapsedTime");
  }
  return {};
}

}  // namespace

std::string bench_gemm(GemmKind kind, int64_t m, int64_t n, int64_t k, int reps, int device, std::vector<float>& ms) {
  DeviceGuard guard(device);
  if (std::string e = guard.error(); !e.empty()) return e;
  LtContext* context = nullptr;
  if (std::string e = lt_context(context); !e.empty()) return e;
  DeviceMemory a, b, d;
  const std::size_t eb = gemm_element_bytes(kind);
  if (std::string e = a.allocate(static_cast<std::size_t>(n * k) * eb, "cudaMalloc of A"); !e.empty()) return e;
  if (std::string e = b.allocate(static_cast<std::size_t>(m * k) * eb, "cudaMalloc of B"); !e.empty()) return e;
  if (std::string e = d.allocate(static_cast<std::size_t>(m * n) * 4, "cudaMalloc of D"); !e.empty()) return e;
  if (std::string e = fill_kind(kind, a.as<void>(), n * k, 1); !e.empty()) return e;
  if (std::string e = fill_kind(kind, b.as<void>(), m * k, 2); !e.empty()) return e;
  LtPlan plan;
  if (std::string e = plan.init(*context, kind, GemmDims{n, m, k, k, k, n}, nullptr, 256); !e.empty()) return e;
  return time_reps(
      reps, [&](int) { return plan.run(*context, a.as<void>(), b.as<void>(), d.as<void>(), nullptr); }, ms);
}

std::string bench_copy(std::size_t bytes, int reps, int device, std::vector<float>& ms) {
  DeviceGuard guard(device);
  if (std::string e = guard.error(); !e.empty()) return e;
  DeviceMemory src, dst;
  if (std::string e = src.allocate(bytes, "cudaMalloc of the copy source"); !e.empty()) return e;
  if (std::string e = dst.allocate(bytes, "cudaMalloc of the copy destination"); !e.empty()) return e;
  return time_reps(
      reps,
      [&](int) {
        const cudaError_t err =
            cudaMemcpyAsync(dst.as<void>(), src.as<void>(), bytes, cudaMemcpyDeviceToDevice, nullptr);
        return err == cudaSuccess ? std::string() : describe(err, "cudaMemcpyAsync");
      },
      ms);
}

std::string bench_forward(const std::vector<DeviceLinear*>& layers, int64_t in, int64_t out, int64_t m, int reps,
                          int calls, int device, std::vector<float>& ms) {
  if (layers.empty()) return "no layers to time";
  if (calls < 1) return "no calls to time";
  DeviceGuard guard(device);
  if (std::string e = guard.error(); !e.empty()) return e;
  DeviceMemory x, y;
  if (std::string e = x.allocate(static_cast<std::size_t>(m * in) * 4, "cudaMalloc of x"); !e.empty()) return e;
  if (std::string e = y.allocate(static_cast<std::size_t>(m * out) * 4, "cudaMalloc of y"); !e.empty()) return e;
  if (std::string e = fill<float>(x.as<void>(), m * in, 3); !e.empty()) return e;
  for (DeviceLinear* layer : layers)  // first use of each layer (plans, working buffers) stays out of the timing
    if (std::string e = layer->forward(x.as<float>(), m, y.as<float>(), nullptr); !e.empty()) return e;
  const std::string e = time_reps(
      reps,
      [&](int r) {
        for (int c = 0; c < calls; ++c) {
          DeviceLinear* layer = layers[static_cast<std::size_t>(r * calls + c) % layers.size()];
          if (std::string err = layer->forward(x.as<float>(), m, y.as<float>(), nullptr); !err.empty()) return err;
        }
        return std::string();
      },
      ms);
  for (float& t : ms) t /= static_cast<float>(calls);
  return e;
}

}  // namespace qjoule::kernels::cuda_detail

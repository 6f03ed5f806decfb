#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/convert_f16_cuda_device.h"

namespace qjoule::kernels::detail {
namespace {

__global__ void convert_kernel(const float* in, __half* out, std::size_t n) {
  const std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i]);
}

std::string describe(cudaError_t err, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
}

// A device buffer freed on every path, errors included.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  cudaError_t status;
  explicit DeviceBuffer(std::size_t n) : status(cudaMalloc(&ptr, n * sizeof(T))) {}
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

std::string convert_f32_to_f16_device(const float* in, uint16_t* out, std::size_t n) {
  DeviceBuffer<float> d_in(n);
  if (d_in.status != cudaSuccess) return describe(d_in.status, "cudaMalloc");
  DeviceBuffer<__half> d_out(n);
  if (d_out.status != cudaSuccess) return describe(d_out.status, "cudaMalloc");
  cudaError_t err = cudaMemcpy(d_in.ptr, in, n * sizeof(float), cudaMemcpyHostToDevice);
  if (err != cudaSuccess) return describe(err, "cudaMemcpy to the GPU");
  constexpr unsigned kThreads = 256;
  const auto blocks = static_cast<unsigned>((n + kThreads - 1) / kThreads);
  convert_kernel<<<blocks, kThreads>>>(d_in.ptr, d_out.ptr, n);
  err = cudaGetLastError();
  if (err != cudaSuccess) return describe(err, "convert_kernel launch");
  err = cudaMemcpy(out, d_out.ptr, n * sizeof(uint16_t), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return describe(err, "cudaMemcpy from the GPU");
  return {};
}

}  // namespace qjoule::kernels::detail

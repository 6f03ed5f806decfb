// For the CUDA kernel tests: a device copy of a host vector (freed at scope exit, read back with
// back()), the NaN that poisons outputs, and the skip when no GPU is usable.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/kernels/cuda_device.h"

#define QJOULE_REQUIRE_USABLE_GPU()                                                              \
  do {                                                                                           \
    const qjoule::kernels::CudaDeviceStatus& gpu_status = qjoule::kernels::cuda_device_status(); \
    if (!gpu_status.usable) GTEST_SKIP() << "no usable GPU: " << gpu_status.reason;              \
  } while (0)

namespace qjoule::test {

template <class T>
class Dev {
 public:
  explicit Dev(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~Dev() { cudaFree(ptr_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  std::vector<T> back() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> host(n_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  std::size_t bytes() const { return std::max<std::size_t>(n_, 1) * sizeof(T); }
  void* ptr_ = nullptr;
  std::size_t n_;
};

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace qjoule::test

// Shared by the nvcc-compiled sources of the CUDA linear layers: error text, an owning device
// allocation and a current-device guard. Errors are returned as text (empty on success); the C++
// side (linear_cuda.cpp) turns them into one-line qjoule::Error messages.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "linear_cuda_device.h"

namespace qjoule::kernels::cuda_detail {

inline std::string describe(cudaError_t err, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
}

inline std::string describe(cublasStatus_t status, const char* what) {
  return std::string(what) + ": " + cublasLtGetStatusString(status) + " (" + cublasLtGetStatusName(status) + ")";
}

// Blocks for a grid-stride loop over n elements with `threads` per block (1 to 65536).
inline unsigned grid_for(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// The error of the last kernel launch, as text ("" when it was accepted).
inline std::string launch_error(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? std::string() : describe(err, kernel);
}

// One cudaMalloc'd region, freed on destruction. Grows on request; never shrinks.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  ~DeviceMemory() {
    release();
    for (void* p : retired_) cudaFree(p);
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Exactly `bytes` of new memory, zero-filled (the previous contents are freed).
  std::string allocate(std::size_t bytes, const char* what) {
    release();
    if (bytes == 0) return {};
    cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
      ptr_ = nullptr;
      return describe(err, what);
    }
    bytes_ = bytes;
    err = cudaMemset(ptr_, 0, bytes);
    return err == cudaSuccess ? std::string() : describe(err, what);
  }

  // At least `bytes`, keeping the current region when it is large enough. A larger one is a new
  // region (at least twice the old): the old one stays allocated, unused, until this object goes,
  // since work queued on any stream, or a CUDA graph recorded earlier (a decode step), may still read it.
  std::string reserve(std::size_t bytes, const char* what) {
    if (bytes <= bytes_) return {};
    void* old = ptr_;
    const std::size_t grown = bytes_ * 2 > bytes ? bytes_ * 2 : bytes;
    ptr_ = nullptr;
    bytes_ = 0;
    std::string error = allocate(grown, what);
    if (old != nullptr) retired_.push_back(old);
    // allocate's zero-fill runs on the legacy stream: done before any stream's work writes the region.
    if (error.empty()) {
      const cudaError_t err = cudaDeviceSynchronize();
      if (err != cudaSuccess) return describe(err, what);
    }
    return error;
  }

  // allocate(bytes) and copy `host` into it.
  std::string upload(const void* host, std::size_t bytes, const char* what) {
    std::string error = allocate(bytes, what);
    if (!error.empty() || bytes == 0) return error;
    const cudaError_t err = cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice);
    return err == cudaSuccess ? std::string() : describe(err, what);
  }

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  std::vector<void*> retired_;  // regions reserve() outgrew: freed with the object
};

// Makes `device` current for its scope and restores the previous device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  }
  ~DeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  std::string error() const { return status_ == cudaSuccess ? std::string() : describe(status_, "cudaSetDevice"); }

 private:
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

// What every device layer shares: the device, its shape, a mutex over its plans and working buffers,
// and the two entry points (device pointers on a stream; host pointers, copied explicitly), both of
// which run the layer's forward_locked with the mutex held and the device current.
class LockedDeviceLinear : public DeviceLinear {
 public:
  std::string forward(const float* x, int64_t m, float* y, CUstream_st* stream) override {
    if (m <= 0) return {};
    DeviceGuard guard(device_);
    if (std::string e = guard.error(); !e.empty()) return e;
    std::lock_guard<std::mutex> lock(mutex_);
    return forward_locked(x, m, y, stream);
  }

  std::string forward_host(const float* x, int64_t m, float* y) override {
    if (m <= 0) return {};
    DeviceGuard guard(device_);
    if (std::string e = guard.error(); !e.empty()) return e;
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t xb = static_cast<std::size_t>(m * in_) * sizeof(float);
    const std::size_t yb = static_cast<std::size_t>(m * out_) * sizeof(float);
    if (std::string e = host_x_.reserve(xb, "cudaMalloc of x"); !e.empty()) return e;
    if (std::string e = host_y_.reserve(yb, "cudaMalloc of y"); !e.empty()) return e;
    cudaError_t err = cudaMemcpy(host_x_.as<void>(), x, xb, cudaMemcpyHostToDevice);
    if (err != cudaSuccess) return describe(err, "cudaMemcpy of x to the GPU");
    if (std::string e = forward_locked(host_x_.as<float>(), m, host_y_.as<float>(), nullptr); !e.empty()) return e;
    err = cudaMemcpy(y, host_y_.as<void>(), yb, cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) return describe(err, "forward (its kernels, or cudaMemcpy of y from the GPU)");
    err = cudaGetLastError();
    return err == cudaSuccess ? std::string() : describe(err, "forward");
  }

 protected:
  // x, y on the device; called with mutex_ held and device_ current.
  virtual std::string forward_locked(const float* x, int64_t m, float* y, cudaStream_t stream) = 0;

  int device_ = 0;
  int64_t out_ = 0, in_ = 0;
  std::mutex mutex_;  // plans and working buffers
  DeviceMemory host_x_, host_y_;
};

}  // namespace qjoule::kernels::cuda_detail

#include "qjoule/kernels/cuda_device.h"

#include <fmt/format.h>

#include "qjoule/error.h"

#if QJOULE_HAVE_CUDA
#include <dlfcn.h>

#include <cuda_runtime_api.h>
#endif

namespace qjoule::kernels {
namespace {

CudaDeviceStatus query() {
  CudaDeviceStatus s;
#if QJOULE_HAVE_CUDA
  s.built = true;
  // Without a driver, say so without starting the CUDA runtime at all (it would only say the same,
  // after allocating what it never frees).
  void* driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    const char* why = ::dlerror();
    s.reason = fmt::format("no NVIDIA driver is installed (cannot load libcuda.so.1: {})", why ? why : "unknown");
    return s;
  }
  ::dlclose(driver);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    const char* what = err == cudaErrorInsufficientDriver ? "no NVIDIA driver is loaded, or it is older than this "
                                                            "build's CUDA runtime"
                       : err == cudaErrorNoDevice         ? "no NVIDIA GPU is present"
                                                          : "the CUDA runtime found no usable GPU";
    s.reason = fmt::format("{} ({}: {})", what, cudaGetErrorName(err), cudaGetErrorString(err));
    return s;
  }
  s.device_count = count;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
      s.devices.push_back(fmt::format("{}: (cudaGetDeviceProperties failed)", i));
      s.pci_bus_ids.emplace_back();
      s.compute_capabilities.push_back(0);
      continue;
    }
    s.devices.push_back(fmt::format("{}: {} (sm_{}{}, {:.1f} GiB)", i, p.name, p.major, p.minor,
                                    double(p.totalGlobalMem) / double(1ull << 30)));
    s.compute_capabilities.push_back(p.major * 10 + p.minor);
    char bus_id[32] = {};
    s.pci_bus_ids.emplace_back(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess ? bus_id : "");
  }
  s.usable = count > 0;
  if (!s.usable) s.reason = "the CUDA runtime reports 0 GPUs";
#else
  s.reason = "this qjoule was built without the CUDA backend (configure with -DQJOULE_CUDA=ON and the CUDA toolkit)";
#endif
  return s;
}

}  // namespace

const CudaDeviceStatus& cuda_device_status() {
  static const CudaDeviceStatus status = query();
  return status;
}

int require_cuda_device(const std::string& device) {
  int index = 0;
  if (device.rfind("cuda:", 0) == 0) {
    try {
      std::size_t used = 0;
      index = std::stoi(device.substr(5), &used);
      if (used != device.size() - 5 || index < 0) throw std::invalid_argument(device);
    } catch (const std::exception&) {
      fail("--device {}: expected cuda or cuda:N with N a GPU index", device);
    }
  } else if (device != "cuda") {
    fail("--device {}: expected cpu, cuda or cuda:N", device);
  }
  const auto& s = cuda_device_status();
  if (!s.usable) fail("--device {}: {}", device, s.reason);
  if (index >= s.device_count)
    fail("--device {}: GPU {} does not exist; this machine has {} (0 to {})", device, index, s.device_count,
         s.device_count - 1);
  if (!cublaslt_status().loaded) fail("--device {}: {}", device, cublaslt_status().reason);
  return index;
}

bool is_cuda_device(const std::string& device) { return device == "cuda" || device.rfind("cuda:", 0) == 0; }

void synchronize_cuda_device(int device) {
#if QJOULE_HAVE_CUDA
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  cudaError_t err = previous == device ? cudaSuccess : cudaSetDevice(device);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (previous >= 0 && previous != device) cudaSetDevice(previous);
  if (err != cudaSuccess) fail("synchronizing GPU {}: {} ({})", device, cudaGetErrorString(err), cudaGetErrorName(err));
#else
  fail("synchronizing GPU {}: this qjoule was built without the CUDA backend", device);
#endif
}

}  // namespace qjoule::kernels

#if !QJOULE_HAVE_CUDA
namespace qjoule::kernels {

const CublasLtStatus& cublaslt_status() {
  static const CublasLtStatus status{false, "", "this qjoule was built without the CUDA backend"};
  return status;
}

std::string cublaslt_location() { return "not built"; }

}  // namespace qjoule::kernels
#endif

// Whether this build has the CUDA backend and whether this machine has a GPU it can use, with the
// reason when it cannot: `--device cuda` answers with one line from here, never a crash.
#pragma once

#include <string>
#include <vector>

namespace qjoule::kernels {

struct CudaDeviceStatus {
  bool built = false;   // qjoule was compiled with the CUDA backend (QJOULE_CUDA)
  bool usable = false;  // at least one GPU answered
  int device_count = 0;
  std::vector<std::string> devices;  // "0: NVIDIA H200 (sm_90, 139.8 GiB)"
  // Per device, its PCI address as cudaDeviceGetPCIBusId writes it ("0000:3B:00.0"), "" when unknown:
  // how a CUDA index (which CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER renumber) is matched with NVML's.
  std::vector<std::string> pci_bus_ids;
  // Per device, major·10 + minor (90 for sm_90; 0 when unknown): fp8 needs 89, tf32 and bf16 80.
  std::vector<int> compute_capabilities;
  std::string reason;  // why not usable, e.g. "no NVIDIA driver: CUDA driver version is insufficient"
};

// cuBLASLt, which the GPU Linears multiply with: loaded with dlopen the first time this is asked (a CPU
// run never asks), so no CUDA library is linked into qjoule (kernels/cuda/cublaslt_loader.cpp).
struct CublasLtStatus {
  bool loaded = false;
  std::string library;  // what was loaded ("libcublasLt.so.13")
  std::string reason;   // why not loaded, one line (a build without the backend says so)
};
const CublasLtStatus& cublaslt_status();
// Where cuBLASLt would be loaded from, found without loading it (loading costs ~200 MB and 0.1 s): its
// path, or "not found: ..." saying where it was looked for (`qjoule --version`).
std::string cublaslt_location();

// Queried once (it initializes the CUDA runtime) and cached.
const CudaDeviceStatus& cuda_device_status();

// Throws qjoule::Error with one line unless `--device cuda[:N]` can run here; returns N.
int require_cuda_device(const std::string& device);

// True for "cuda" and "cuda:..." (a device that is not the CPU and must go through require_cuda_device).
bool is_cuda_device(const std::string& device);

// Waits until GPU `device` has finished all its queued work (cudaDeviceSynchronize, the current device
// restored afterwards): what an energy window does at both ends. A CUDA error, or a build without the
// backend, is a qjoule::Error with one line.
void synchronize_cuda_device(int device);

}  // namespace qjoule::kernels

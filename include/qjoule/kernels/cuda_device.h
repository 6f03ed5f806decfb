// Whether this build has the CUDA backend and whether this machine has a GPU it can use, with the
// reason when it cannot: `--device cuda` answers with one line from here, never a crash.
#pragma once

#include <string>
#include <vector>

namespace qjoule::kernels {

struct CudaDeviceStatus {
  bool built = false;                // qjoule was compiled with the CUDA backend (QJOULE_CUDA)
  bool usable = false;               // at least one GPU answered
  int device_count = 0;
  std::vector<std::string> devices;  // "0: NVIDIA H200 (sm_90, 139.8 GiB)"
  std::string reason;                // why not usable, e.g. "no NVIDIA driver: CUDA driver version is insufficient"
};

// Queried once (it initializes the CUDA runtime) and cached.
const CudaDeviceStatus& cuda_device_status();

// Throws qjoule::Error with one line unless `--device cuda[:N]` can run here; returns N.
int require_cuda_device(const std::string& device);

}  // namespace qjoule::kernels

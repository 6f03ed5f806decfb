// The GPUs this process may use, as its job says, so that GPU energy comes from those GPUs only and
// never from a neighbour's on a shared node:
//   CUDA_VISIBLE_DEVICES   indices, GPU-<uuid> or MIG-<uuid>, comma-separated ("" or NoDevFiles: none)
//   SLURM_STEP_GPUS        indices of the GPUs of this job step
//   SLURM_JOB_GPUS         indices of the GPUs of this job
// The first one set decides. Unset all: every GPU of the machine (nothing restricts it).
#pragma once

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace qjoule::energy {

struct JobGpus {
  std::string variable;              // "CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS" or "SLURM_JOB_GPUS"
  std::string value;                 // as set
  std::vector<std::string> entries;  // "1", "GPU-8f2e...", "MIG-5a1b..."; empty: no GPU at all
  // CUDA_VISIBLE_DEVICES indices count GPUs in CUDA's order, which is NVML's (PCI bus order) only with
  // CUDA_DEVICE_ORDER=PCI_BUS_ID; otherwise an index may name another GPU (UUIDs are exact).
  bool indices_in_cuda_order = false;
};

// Reads the variables above through `getenv` (default: the process environment).
std::optional<JobGpus> job_gpus_from_environment(const std::function<const char*(const char*)>& getenv =
                                                     [](const char* name) { return std::getenv(name); });

}  // namespace qjoule::energy

#include "qjoule/energy/job_gpus.h"

#include <cstdlib>
#include <string_view>

namespace qjoule::energy {
namespace {

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return std::string(s);
}

std::vector<std::string> comma_list(const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto comma = value.find(',', start);
    const std::string item =
        trimmed(std::string_view(value).substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::optional<JobGpus> job_gpus_from_environment(const std::function<const char*(const char*)>& getenv) {
  for (const char* variable : {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const char* value = getenv(variable);
    if (value == nullptr) continue;
    JobGpus job;
    job.variable = variable;
    job.value = value;
    if (job.value != "NoDevFiles") job.entries = comma_list(job.value);
    if (job.variable == "CUDA_VISIBLE_DEVICES") {
      const char* order = getenv("CUDA_DEVICE_ORDER");
      job.indices_in_cuda_order = order == nullptr || std::string_view(order) != "PCI_BUS_ID";
    }
    return job;
  }
  return std::nullopt;
}

}  // namespace qjoule::energy

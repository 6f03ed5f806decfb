// run_environment(): what a record needs to say where its numbers come from.
#include <sys/utsname.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <dnnl.hpp>

#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/slurm_sweep.h"
#include "qjoule/build_info.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/kernels/kernel_overrides.h"

namespace qjoule::bench {
namespace {

// The /proc/cpuinfo flags that decide which kernels can run.
const std::set<std::string>& interesting_flags() {
  static const std::set<std::string> flags = {"avx",         "avx2",     "fma",         "f16c",     "avx512f",
                                              "avx512bw",    "avx512vl", "avx512_vnni", "avx_vnni", "avx512_bf16",
                                              "avx512_fp16", "amx_tile", "amx_int8",    "amx_bf16", "hypervisor"};
  return flags;
}

}  // namespace

nlohmann::json run_environment() {
  nlohmann::json env = nlohmann::json::object();
  std::string model_name = "unknown";
  std::vector<std::string> isa;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  bool flags_done = false;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model_name == "unknown") model_name = value;
    if (key == "flags" && !flags_done) {
      std::istringstream words(value);
      std::string w;
      while (words >> w)
        if (interesting_flags().count(w)) isa.push_back(w);
      flags_done = true;
    }
  }
  env["cpu"] = model_name;
  env["logical_cpus"] = std::thread::hardware_concurrency();
  env["isa"] = isa;
  struct utsname u {};
  if (::uname(&u) == 0) env["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  env["compiler"] = build_info::kCompiler;
  env["build_type"] = build_info::kBuildType;
  env["qjoule_version"] = build_info::kVersion;
  env["qjoule_commit"] = build_info::kGitCommit;
  const dnnl_version_t* v = dnnl_version();
  env["onednn"] = std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  env["device"] = "cpu";
  // The kernel choices forced through the environment (qjoule/kernels/kernel_overrides.h), by variable: {}
  // when qjoule chose every kernel itself.
  env["kernel_overrides"] = kernels::kernel_overrides_in_force();
  // The mode under which the weights were advised for 2 MiB huge pages (qjoule/io/huge_pages.h): the
  // kernel gives them only in "always" and "madvise", and only where whole free pages exist.
  env["transparent_hugepages"] = io::transparent_huge_pages_mode();
  // Inside Slurm: the job, array task, node and the CPUs / GPUs it was given; absent elsewhere.
  if (const auto place = slurm_place()) env["slurm"] = *place;
  return env;
}

}  // namespace qjoule::bench

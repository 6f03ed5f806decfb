// cuBLASLt, loaded the first time a GPU run needs it (dlopen), as NVML is: the CUDA backend's kernels call
// the cublasLt* functions they always called, and the definitions below forward each to the library's own,
// found with dlsym. Nothing links libcublasLt.so, so a CPU run neither loads its ~60 MB of code nor pays its
// start-up (issue: the CPU path carries no GPU; `ldd qjoule` lists no CUDA library), and a machine without
// it runs every CPU command; `--device cuda` there ends in one line naming the library and the reason.
//
// The library: $QJOULE_CUBLASLT_LIB when set (tests hide the real one that way), else the soname of the
// toolkit qjoule was built with (libcublasLt.so.13), else that toolkit's own copy (its absolute path).
#include <dlfcn.h>

#include <cublasLt.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "qjoule/kernels/cuda_device.h"

namespace qjoule::kernels {
namespace {

struct CublasLt {
  CublasLtStatus status;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetStatusName) status_name = nullptr;
  decltype(&::cublasLtGetStatusString) status_string = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoCapGetAttribute) algo_cap_get = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
};

template <class F>
bool resolve(void* handle, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(::dlsym(handle, name));
  if (out == nullptr && missing.empty()) missing = name;
  return out != nullptr;
}

CublasLt load() {
  CublasLt lt;
  std::string tried;
  void* handle = nullptr;
  const char* forced = std::getenv("QJOULE_CUBLASLT_LIB");
  for (const std::string& name : forced != nullptr
                                     ? std::vector<std::string>{forced}
                                     : std::vector<std::string>{QJOULE_CUBLASLT_SONAME, QJOULE_CUBLASLT_PATH}) {
    handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      lt.status.library = name;
      break;
    }
    const char* why = ::dlerror();
    tried += fmt::format("{}dlopen {}: {}", tried.empty() ? "" : "; ", name, why != nullptr ? why : "failed");
  }
  if (handle == nullptr) {
    lt.status.reason = fmt::format("cuBLASLt ({}, CUDA {}'s) cannot be loaded: {}", QJOULE_CUBLASLT_SONAME,
                                   QJOULE_CUDA_VERSION, tried);
    return lt;
  }
  std::string missing;
  resolve(handle, "cublasLtCreate", lt.create, missing);
  resolve(handle, "cublasLtDestroy", lt.destroy, missing);
  resolve(handle, "cublasLtGetStatusName", lt.status_name, missing);
  resolve(handle, "cublasLtGetStatusString", lt.status_string, missing);
  resolve(handle, "cublasLtMatmul", lt.matmul, missing);
  resolve(handle, "cublasLtMatmulAlgoCapGetAttribute", lt.algo_cap_get, missing);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic", lt.heuristic, missing);
  resolve(handle, "cublasLtMatmulDescCreate", lt.desc_create, missing);
  resolve(handle, "cublasLtMatmulDescDestroy", lt.desc_destroy, missing);
  resolve(handle, "cublasLtMatmulDescSetAttribute", lt.desc_set, missing);
  resolve(handle, "cublasLtMatmulPreferenceCreate", lt.pref_create, missing);
  resolve(handle, "cublasLtMatmulPreferenceDestroy", lt.pref_destroy, missing);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute", lt.pref_set, missing);
  resolve(handle, "cublasLtMatrixLayoutCreate", lt.layout_create, missing);
  resolve(handle, "cublasLtMatrixLayoutDestroy", lt.layout_destroy, missing);
  if (!missing.empty()) {
    lt.status.reason =
        fmt::format("{} has no {} (another cuBLASLt than CUDA {}'s?)", lt.status.library, missing, QJOULE_CUDA_VERSION);
    return lt;
  }
  lt.status.loaded = true;
  return lt;
}

const CublasLt& lt() {
  static const CublasLt loaded = load();
  return loaded;
}

constexpr const char* kNotLoaded = "CUBLAS_STATUS_NOT_INITIALIZED (cuBLASLt is not loaded)";

}  // namespace

const CublasLtStatus& cublaslt_status() { return lt().status; }

std::string cublaslt_location() {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (const char* forced = std::getenv("QJOULE_CUBLASLT_LIB")) {
    return fs::exists(forced, ec) ? fmt::format("{} (QJOULE_CUBLASLT_LIB)", forced)
                                  : fmt::format("not found: QJOULE_CUBLASLT_LIB={} does not exist", forced);
  }
  // Where the dynamic loader would look: LD_LIBRARY_PATH, the folders ld.so.conf lists, the system's.
  std::vector<std::string> dirs;
  const auto split = [&](const std::string& list) {
    std::size_t start = 0;
    while (start <= list.size()) {
      const std::size_t colon = std::min(list.find(':', start), list.size());
      if (colon > start) dirs.push_back(list.substr(start, colon - start));
      start = colon + 1;
    }
  };
  if (const char* path = std::getenv("LD_LIBRARY_PATH")) split(path);
  std::vector<fs::path> confs = {"/etc/ld.so.conf"};
  for (const auto& entry : fs::directory_iterator("/etc/ld.so.conf.d", ec))
    if (entry.path().extension() == ".conf") confs.push_back(entry.path());
  for (const auto& conf : confs) {
    std::ifstream in(conf);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line.front() == '/') dirs.push_back(line.substr(0, line.find_first_of(" \t#")));
  }
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"}) dirs.push_back(d);
  for (const auto& d : dirs) {
    const fs::path candidate = fs::path(d) / QJOULE_CUBLASLT_SONAME;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  if (fs::exists(QJOULE_CUBLASLT_PATH, ec)) return QJOULE_CUBLASLT_PATH;
  return fmt::format("not found: no {} on the loader's path nor at {}", QJOULE_CUBLASLT_SONAME, QJOULE_CUBLASLT_PATH);
}

}  // namespace qjoule::kernels

// The cuBLASLt API as the backend calls it, each forwarded to the loaded library's function (or, where
// it could not be loaded, CUBLAS_STATUS_NOT_INITIALIZED: every caller checks statuses, and the GPU
// Linear factories check cublaslt_status() first).
using qjoule::kernels::lt;

#define QJOULE_FORWARD(member, ...) \
  return lt().member != nullptr ? lt().member(__VA_ARGS__) : CUBLAS_STATUS_NOT_INITIALIZED

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) { QJOULE_FORWARD(create, lightHandle); }
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) { QJOULE_FORWARD(destroy, lightHandle); }
const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  return lt().status_name != nullptr ? lt().status_name(status) : qjoule::kernels::kNotLoaded;
}
const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  return lt().status_string != nullptr ? lt().status_string(status) : qjoule::kernels::kNotLoaded;
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                           const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                           const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                           cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                           const cublasLtMatmulAlgo_t* algo, void* workspace,
                                           size_t workspaceSizeInBytes, cudaStream_t stream) {
  QJOULE_FORWARD(matmul, lightHandle, computeDesc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                 workspaceSizeInBytes, stream);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCapGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                              cublasLtMatmulAlgoCapAttributes_t attr, void* buf,
                                                              size_t sizeInBytes, size_t* sizeWritten) {
  QJOULE_FORWARD(algo_cap_get, algo, attr, buf, sizeInBytes, sizeWritten);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  QJOULE_FORWARD(heuristic, lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc, preference, requestedAlgoCount,
                 heuristicResultsArray, returnAlgoCount);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  QJOULE_FORWARD(desc_create, matmulDesc, computeType, scaleType);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  QJOULE_FORWARD(desc_destroy, matmulDesc);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
  QJOULE_FORWARD(desc_set, matmulDesc, attr, buf, sizeInBytes);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  QJOULE_FORWARD(pref_create, pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  QJOULE_FORWARD(pref_destroy, pref);
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t sizeInBytes) {
  QJOULE_FORWARD(pref_set, pref, attr, buf, sizeInBytes);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  QJOULE_FORWARD(layout_create, matLayout, type, rows, cols, ld);
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  QJOULE_FORWARD(layout_destroy, matLayout);
}

#include "qjoule/limits/gpu_limits.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"

namespace qjoule::limits {
namespace {

constexpr int64_t kGemmSize = 4096;
constexpr int kGemmReps = 5, kCopyReps = 10;

}  // namespace

std::string gpu_fingerprint(int device) {
  const auto gpu = kernels::cuda_gpu_info(device);
  return fmt::format("gpu={}; cc={}.{}; sms={}; memory={}", gpu.name, gpu.major, gpu.minor, gpu.sm_count,
                     gpu.memory_bytes);
}

MachineLimits measure_gpu_limits(int device) {
  kernels::require_cuda_device(fmt::format("cuda:{}", device));
  const auto start = std::chrono::steady_clock::now();
  const auto gpu = kernels::cuda_gpu_info(device);
  MachineLimits l;
  l.device = fmt::format("cuda:{}", device);
  l.threads = 0;
  l.machine = gpu_fingerprint(device);
  l.measured_at = measured_now();
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, static_cast<std::size_t>(gpu.memory_bytes / 8));
  const double copy_ms = kernels::median_of(kernels::time_device_copy(bytes, kCopyReps, device));
  l.read_gb_per_s = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
  l.unavailable["triad_gb_per_s"] = "a CPU figure (STREAM triad)";
  for (const char* key : {"amx_bf16_gflops", "amx_int8_gops"}) l.unavailable[key] = "a CPU figure (AMX tiles)";
  struct Type {
    quant::Format format;
    const char* key;
    std::optional<double> MachineLimits::*figure;
    int min_cc;
  };
  const Type types[] = {{quant::Format::fp32, "fp32_gflops", &MachineLimits::fp32_gflops, 0},
                        {quant::Format::tf32, "tf32_gflops", &MachineLimits::tf32_gflops, 80},
                        {quant::Format::fp16, "fp16_gflops", &MachineLimits::fp16_gflops, 75},
                        {quant::Format::bf16, "bf16_gflops", &MachineLimits::bf16_gflops, 80},
                        {quant::Format::int8, "int8_gops", &MachineLimits::int8_gops, 75},
                        {quant::Format::fp8, "fp8_gflops", &MachineLimits::fp8_gflops, 89}};
  const int cc = gpu.major * 10 + gpu.minor;
  const double ops = 2.0 * static_cast<double>(kGemmSize * kGemmSize) * static_cast<double>(kGemmSize);
  for (const Type& t : types) {
    if (cc < t.min_cc) {
      l.unavailable[t.key] = fmt::format("needs sm_{} or newer; this GPU is sm_{}", t.min_cc, cc);
      continue;
    }
    try {
      const double ms =
          kernels::median_of(kernels::time_cublaslt_gemm(t.format, kGemmSize, kGemmSize, kGemmSize, kGemmReps, device));
      l.*t.figure = ops / (ms * 1e-3) / 1e9;
    } catch (const std::exception& e) {
      l.unavailable[t.key] = e.what();
    }
  }
  l.method = fmt::format(
      "memory: device-to-device copy of {} MiB, bytes read + written, median of {}; compute: cuBLASLt D = A·B at "
      "M = N = K = {}, random operands, median of {} after warm-up, per type",
      bytes >> 20, kCopyReps, kGemmSize, kGemmReps);
  l.measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return l;
}

}  // namespace qjoule::limits

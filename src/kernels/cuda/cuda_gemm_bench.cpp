#include "qjoule/kernels/cuda_gemm_bench.h"

#include <algorithm>

#include <fmt/format.h>

#include "qjoule/error.h"

#if QJOULE_HAVE_CUDA
#include "kernels/cuda/cuda_bench_device.h"
#include "kernels/cuda/linear_cuda_device.h"
#endif

namespace qjoule::kernels {
namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Datasheet dense figures, TFLOP/s / TOP/s.
struct Datasheet {
  const char* label;
  double tf32, fp16, bf16, int8, fp8;
};
constexpr Datasheet kH100Sxm{"H100 SXM5", 494.7, 989.4, 989.4, 1978.9, 1978.9};
constexpr Datasheet kH100Pcie{"H100 PCIe", 378.0, 756.0, 756.0, 1513.0, 1513.0};
constexpr Datasheet kA100{"A100", 156.0, 312.0, 312.0, 624.0, 0.0};

const Datasheet* datasheet_for(const std::string& name) {
  if (has(name, "NVL")) return nullptr;  // H100 NVL / H200 NVL: other clocks and power limits
  if (has(name, "H100") && has(name, "PCIe")) return &kH100Pcie;
  if (has(name, "H100") && (has(name, "SXM") || has(name, "HBM3"))) return &kH100Sxm;
  if (has(name, "H200")) return &kH100Sxm;  // the H100's tensor cores and clocks (SXM)
  if (has(name, "A100")) return &kA100;
  return nullptr;
}

double pick(const Datasheet& d, quant::Format precision) {
  using quant::Format;
  if (precision == Format::tf32) return d.tf32;
  if (precision == Format::fp16) return d.fp16;
  if (precision == Format::bf16) return d.bf16;
  if (precision == Format::int8) return d.int8;
  if (precision == Format::fp8) return d.fp8;
  return 0.0;
}

// Dense FLOP (OP) per clock per SM of each architecture's tensor cores, FP32 accumulation.
Datasheet per_sm_rate(int major, int minor) {
  const int cc = major * 10 + minor;
  switch (cc) {
    case 75: return {"sm_75", 0, 1024, 0, 2048, 0};
    case 80: return {"sm_80", 1024, 2048, 2048, 4096, 0};
    case 86: return {"sm_86", 512, 1024, 1024, 2048, 0};
    case 89: return {"sm_89", 512, 1024, 1024, 2048, 2048};
    case 90: return {"sm_90", 2048, 4096, 4096, 8192, 8192};
    default: return {"", 0, 0, 0, 0, 0};
  }
}

}  // namespace

DensePeak dense_tensor_peak(const CudaGpuInfo& gpu, quant::Format precision) {
  DensePeak peak;
  if (const Datasheet* d = datasheet_for(gpu.name)) {
    peak.tops = pick(*d, precision);
    peak.source = peak.tops > 0 ? fmt::format("datasheet: {}", d->label)
                                : fmt::format("the {} datasheet has no dense {} tensor rate", d->label, precision);
    return peak;
  }
  const Datasheet rate = per_sm_rate(gpu.major, gpu.minor);
  const double per_sm = pick(rate, precision);
  if (per_sm <= 0 || gpu.sm_count <= 0 || gpu.clock_mhz <= 0) {
    peak.source = fmt::format("no dense {} tensor rate known for sm_{}{}", precision, gpu.major, gpu.minor);
    return peak;
  }
  peak.tops = double(gpu.sm_count) * double(gpu.clock_mhz) * 1e6 * per_sm / 1e12;
  peak.source = fmt::format("estimate: {} SMs x {} MHz x {} {}/clk/SM", gpu.sm_count, gpu.clock_mhz, per_sm,
                            precision == quant::Format::int8 ? "OP" : "FLOP");
  return peak;
}

double median_of(std::vector<float> times) {
  if (times.empty()) return 0.0;
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return n % 2 == 1 ? double(times[n / 2]) : 0.5 * (double(times[n / 2 - 1]) + double(times[n / 2]));
}

#if QJOULE_HAVE_CUDA

CudaGpuInfo cuda_gpu_info(int device) {
  cuda_detail::DeviceInfo d;
  if (std::string e = cuda_detail::query_device(device, d); !e.empty()) fail("GPU {}: {}", device, e);
  CudaGpuInfo info;
  info.name = d.name;
  info.major = d.major;
  info.minor = d.minor;
  info.sm_count = d.sm_count;
  info.clock_mhz = d.clock_khz / 1000;
  info.l2_bytes = d.l2_bytes;
  info.memory_bytes = d.total_bytes;
  return info;
}

std::vector<float> time_cublaslt_gemm(quant::Format precision, int64_t m, int64_t n, int64_t k, int reps, int device) {
  using cuda_detail::GemmKind;
  GemmKind kind;
  using quant::Format;
  if (precision == Format::fp32)
    kind = GemmKind::f32;
  else if (precision == Format::tf32)
    kind = GemmKind::tf32;
  else if (precision == Format::fp16)
    kind = GemmKind::f16;
  else if (precision == Format::bf16)
    kind = GemmKind::bf16;
  else if (precision == Format::int8)
    kind = GemmKind::s8;
  else if (precision == Format::fp8)
    kind = GemmKind::e4m3;
  else
    fail("time_cublaslt_gemm: precision '{}'; expected fp32, tf32, fp16, bf16, int8 or fp8", precision);
  std::vector<float> ms;
  if (std::string e = cuda_detail::bench_gemm(kind, m, n, k, std::max(reps, 1), device, ms); !e.empty())
    fail("cuBLASLt {} GEMM {}x{}x{} on GPU {}: {}", precision, m, n, k, device, e);
  return ms;
}

std::vector<float> time_device_copy(std::size_t bytes, int reps, int device) {
  std::vector<float> ms;
  if (std::string e = cuda_detail::bench_copy(bytes, std::max(reps, 1), device, ms); !e.empty())
    fail("device copy of {} bytes on GPU {}: {}", bytes, device, e);
  return ms;
}

#else

CudaGpuInfo cuda_gpu_info(int device) { fail("GPU {}: this qjoule was built without the CUDA backend", device); }

std::vector<float> time_cublaslt_gemm(quant::Format precision, int64_t, int64_t, int64_t, int, int) {
  fail("cuBLASLt {} GEMM: this qjoule was built without the CUDA backend", precision);
}

std::vector<float> time_device_copy(std::size_t, int, int) {
  fail("device copy: this qjoule was built without the CUDA backend");
}

#endif

}  // namespace qjoule::kernels

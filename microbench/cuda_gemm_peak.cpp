// cuda_gemm_peak: what the CUDA backend achieves against the GPU's ceilings (issue 8).
//
//  1. cuBLASLt matrix products at M = N = K = 8192 (--size) in FP16, BF16, INT8 and FP8 on random
//     operands: the product alone (no conversion, quantization or epilogue), as TFLOP/s (TOP/s for
//     INT8) and as a fraction of the GPU's dense tensor-core peak (dense_tensor_peak: the datasheet
//     figure for GPUs it knows, otherwise an estimate it labels as such).
//  2. The device's copy bandwidth, measured: a device-to-device copy of 1 GiB, bytes read + written.
//  3. qjoule's 4-bit GEMV kernels at decode shapes (M = 1, K = N = 8192): a whole forward_device call,
//     bytes moved (packed weights + scales + bias + x + y) per second, as a fraction of (2).
//     Several copies of the layer are cycled so that the weights come from DRAM, not from L2.
//
// Every figure is the median of --reps timed runs (CUDA events) after warm-up runs. Without a usable
// GPU it prints "no usable GPU: <reason>" and exits 0.
//
//   build/release/microbench/cuda_gemm_peak [--reps N] [--size N] [--device N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"
#include "qjoule/kernels/linear_cuda.h"

namespace {

using namespace qjoule::kernels;
namespace quant = qjoule::quant;

struct Options {
  int reps = 20;
  int64_t size = 8192;
  int device = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--reps" && has_value) {
      o.reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--size" && has_value) {
      o.size = std::max<int64_t>(64, std::atoll(argv[++i]) / 64 * 64);
    } else if (a == "--device" && has_value) {
      o.device = std::atoi(argv[++i]);
    } else {
      fmt::print(stderr, "usage: cuda_gemm_peak [--reps N] [--size N (a multiple of 64)] [--device N]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

void gemm_table(const Options& o, const CudaGpuInfo& gpu) {
  const int64_t n = o.size;
  const double ops = 2.0 * double(n) * double(n) * double(n);
  fmt::print("\ncuBLASLt matrix products D = A·B, M = N = K = {}, random operands, the product alone; median of {}\n",
             n, o.reps);
  fmt::print("{:<6} {:<24} {:>9} {:>9} {:>9} {:>9}  {}\n", "format", "cuBLASLt types", "ms", "T(FL)OP/s", "peak",
             "fraction", "peak source");
  struct Row {
    quant::Format precision;
    const char* types;
    int min_cc;
  };
  const Row rows[] = {{quant::Format::fp16, "f16 x f16 -> f32", 75},
                      {quant::Format::bf16, "bf16 x bf16 -> f32", 80},
                      {quant::Format::int8, "s8 x s8 -> s32", 75},
                      {quant::Format::fp8, "e4m3 x e4m3 -> f32", 89}};
  const int cc = gpu.major * 10 + gpu.minor;
  for (const Row& r : rows) {
    if (cc < r.min_cc) {
      fmt::print("{:<6} {:<24} not run: needs sm_{} or newer; this GPU is sm_{}\n", r.precision, r.types, r.min_cc, cc);
      continue;
    }
    try {
      const double ms = median_of(time_cublaslt_gemm(r.precision, n, n, n, o.reps, o.device));
      const double achieved = ops / (ms * 1e-3) / 1e12;
      const DensePeak peak = dense_tensor_peak(gpu, r.precision);
      const std::string fraction = peak.tops > 0 ? fmt::format("{:.3f}", achieved / peak.tops) : "n/a";
      fmt::print("{:<6} {:<24} {:>9.3f} {:>9.1f} {:>9.1f} {:>9}  {}\n", r.precision, r.types, ms, achieved, peak.tops,
                 fraction, peak.source);
    } catch (const std::exception& e) {
      fmt::print("{:<6} {:<24} failed: {}\n", r.precision, r.types, e.what());
    }
  }
}

double copy_bandwidth(const Options& o, const CudaGpuInfo& gpu) {
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, static_cast<std::size_t>(gpu.memory_bytes / 8));
  const double ms = median_of(time_device_copy(bytes, o.reps, o.device));
  const double bandwidth = 2.0 * double(bytes) / (ms * 1e-3);
  fmt::print("\ndevice copy: {} MiB device-to-device, median of {}: {:.3f} ms, {:.1f} GB/s (bytes read + written)\n",
             bytes >> 20, o.reps, ms, bandwidth / 1e9);
  return bandwidth;
}

void gemv_table(const Options& o, const CudaGpuInfo& gpu, double copy_bw) {
  const int64_t n = o.size, k = o.size;
  std::vector<float> w(static_cast<std::size_t>(n * k)), b(static_cast<std::size_t>(n));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (float& v : w) v = dist(rng);
  for (float& v : b) v = dist(rng);
  fmt::print("\n4-bit weight-only GEMV (qjoule kernels), M = 1, K = N = {}; one forward_device call; median of {}\n", n,
             o.reps);
  fmt::print("{:<15} {:<24} {:>7} {:>9} {:>9} {:>9} {:>9}\n", "format", "kernel", "copies", "us", "MB moved", "GB/s",
             "of copy");
  struct Row {
    const char* name;
    quant::FormatSpec format;
  };
  std::vector<Row> rows;
  for (bool asym : {false, true}) {
    quant::FormatSpec f;
    f.format = quant::Format::int4;
    f.group_size = 128;
    f.int4_asymmetric = asym;
    rows.push_back({asym ? "int4 g128 asym" : "int4 g128 sym", f});
  }
  for (bool dq : {false, true}) {
    quant::FormatSpec f;
    f.format = quant::Format::nf4;
    f.nf4_double_quant = dq;
    rows.push_back({dq ? "nf4 dq" : "nf4", f});
  }
  for (const Row& r : rows) {
    try {
      std::vector<std::unique_ptr<CudaLinear>> layers;
      layers.push_back(make_linear_cuda(r.format, w.data(), b.data(), n, k, "bench.weight", o.device));
      const std::size_t held = layers[0]->bytes_held();
      // Enough copies that together they are 4× the L2, so each call reads its weights from DRAM.
      const auto copies =
          static_cast<std::size_t>(std::clamp<int64_t>((4 * gpu.l2_bytes + int64_t(held) - 1) / int64_t(held), 2, 64));
      while (layers.size() < copies)
        layers.push_back(make_linear_cuda(r.format, w.data(), b.data(), n, k, "bench.weight", o.device));
      std::vector<const CudaLinear*> raw;
      for (const auto& l : layers) raw.push_back(l.get());
      const double ms = median_of(time_linear_forward(raw, 1, std::max(o.reps, 2 * int(copies))));
      const double moved = double(held) + 4.0 * double(k) + 4.0 * double(n);
      const double bw = moved / (ms * 1e-3);
      fmt::print("{:<15} {:<24} {:>7} {:>9.2f} {:>9.2f} {:>9.1f} {:>9.3f}\n", r.name, layers[0]->kernel_path_for(1),
                 copies, ms * 1e3, moved / 1e6, bw / 1e9, bw / copy_bw);
    } catch (const std::exception& e) {
      fmt::print("{:<15} failed: {}\n", r.name, e.what());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const CudaDeviceStatus& status = cuda_device_status();
  if (!status.usable) {
    fmt::print("no usable GPU: {}\n", status.reason);
    return 0;
  }
  try {
    require_cuda_device("cuda:" + std::to_string(o.device));
    const CudaGpuInfo gpu = cuda_gpu_info(o.device);
    fmt::print("cuda_gemm_peak: GPU {}: {} (sm_{}{}, {} SMs, {} MHz peak SM clock, {} MiB L2, {:.1f} GiB)\n", o.device,
               gpu.name, gpu.major, gpu.minor, gpu.sm_count, gpu.clock_mhz, gpu.l2_bytes >> 20,
               double(gpu.memory_bytes) / double(int64_t{1} << 30));
    gemm_table(o, gpu);
    const double copy_bw = copy_bandwidth(o, gpu);
    gemv_table(o, gpu, copy_bw);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}

// cuda_gemm_peak: what the CUDA backend achieves against the GPU's ceilings (issue 8).
//
//  1. cuBLASLt matrix products at M = N = K = 8192 (--size) in FP16, BF16, INT8 and FP8 on random
//     operands: the product alone (no conversion, quantization or epilogue), as TFLOP/s (TOP/s for
//     INT8) and as a fraction of the GPU's dense tensor-core peak (dense_tensor_peak: the datasheet
//     figure for GPUs it knows, otherwise an estimate it labels as such).
//  2. The device's copy bandwidth, measured: a device-to-device copy of 1 GiB, bytes read + written.
//  3. qjoule's decode GEMV kernels (M = 1) of every format at a 1.1B Llama's shapes and at --size
//     squared: a forward_device call timed alone, and one of as many calls back to back as there are
//     copies of the layer (the launches overlap the calls before them, as in a decode step); bytes
//     moved (weights + scales + bias + x + y) per second of the back-to-back calls, as a fraction of
//     (2). Several copies of the layer are cycled so that the weights come from DRAM, not from L2.
//
// Every figure is the median of --reps timed runs (CUDA events) after warm-up runs; printed in the
// order 2, 3, 1, row by row. Without a usable GPU it prints "no usable GPU: <reason>" and exits 0.
//
//   build/release/microbench/cuda_gemm_peak [--reps N] [--size N] [--device N] [--gemv-only]
//                                            [--gemv-formats int4,nf4,...] (plain: the int4 / nf4 rows
//                                            of QJOULE_CUDA_GEMV4=plain too; every row without the option)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/cuda_gemm_bench.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/quant/format_spec.h"

namespace {

using namespace qjoule::kernels;
namespace quant = qjoule::quant;

struct Options {
  int reps = 20;
  int64_t size = 8192;
  int device = 0;
  bool gemv_only = false;    // no cuBLASLt product table
  std::string gemv_formats;  // comma-separated; empty: every format
};

// The formats of the GEMV table, in its order; "plain" in --gemv-formats adds the QJOULE_CUDA_GEMV4=plain rows.
constexpr std::array<const char*, 8> kGemvFormats = {"int4", "nf4",           "int8",   "fp16",
                                                     "fp32", "int4:g32:asym", "nf4:dq", "bf16"};

// --gemv-formats LIST as ",a,b,": every name one of kGemvFormats or "plain", else one line and exit 2.
std::string gemv_format_list(const std::string& list) {
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    if (name != "plain" && std::find(kGemvFormats.begin(), kGemvFormats.end(), name) == kGemvFormats.end()) {
      fmt::print(stderr, "cuda_gemm_peak: --gemv-formats: '{}' is not a GEMV format, expected {} or plain\n", name,
                 fmt::join(kGemvFormats, ", "));
      std::exit(2);
    }
    begin = end + 1;
  }
  return fmt::format(",{},", list);
}

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
    } else if (a == "--gemv-only") {
      o.gemv_only = true;
    } else if (a == "--gemv-formats" && has_value) {
      o.gemv_formats = gemv_format_list(argv[++i]);
    } else {
      fmt::print(stderr,
                 "usage: cuda_gemm_peak [--reps N] [--size N (a multiple of 64)] [--device N] [--gemv-only] "
                 "[--gemv-formats int4,nf4,int8,fp16,fp32,int4:g32:asym,nf4:dq,bf16,plain]\n");
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

// The decode GEMV of a format at one shape (K inputs, N outputs), M = 1: one forward_device call
// alone, and `copies` calls back to back (the rate).
void gemv_row(const Options& o, const CudaGpuInfo& gpu, double copy_bw, const char* name, const quant::FormatSpec& f,
              int64_t k, int64_t n) {
  try {
    std::vector<float> w(static_cast<std::size_t>(n * k)), b(static_cast<std::size_t>(n));
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (float& v : w) v = dist(rng);
    for (float& v : b) v = dist(rng);
    std::vector<std::unique_ptr<CudaLinear>> layers;
    layers.push_back(make_linear_cuda(f, w.data(), b.data(), n, k, "bench.weight", o.device));
    const std::size_t held = layers[0]->bytes_held();
    // Enough copies that together they are 3× the L2, so each call reads its weights from DRAM.
    const auto copies =
        static_cast<std::size_t>(std::clamp<int64_t>((3 * gpu.l2_bytes + int64_t(held) - 1) / int64_t(held), 2, 32));
    while (layers.size() < copies)
      layers.push_back(make_linear_cuda(f, w.data(), b.data(), n, k, "bench.weight", o.device));
    std::vector<const CudaLinear*> raw;
    for (const auto& l : layers) raw.push_back(l.get());
    const double alone = median_of(time_linear_forward(raw, 1, std::max(o.reps, 2 * int(copies))));
    const double ms = median_of(time_linear_forward(raw, 1, o.reps, int(copies)));
    const double moved = double(held) + 4.0 * double(k) + 4.0 * double(n);
    const double bw = moved / (ms * 1e-3);
    fmt::print("{:<15} {:>5}x{:<5} {:<30} {:>6} {:>8.2f} {:>8.2f} {:>8.2f} {:>8.1f} {:>8.3f}\n", name, k, n,
               layers[0]->kernel_path_for(1), copies, alone * 1e3, ms * 1e3, moved / 1e6, bw / 1e9, bw / copy_bw);
  } catch (const std::exception& e) {
    fmt::print("{:<15} {:>5}x{:<5} failed: {}\n", name, k, n, e.what());
  }
  std::fflush(stdout);  // row by row: a run stopped early keeps what it measured
}

// The decode GEMVs (M = 1) of every format with one, at --size x --size and a 1.1B Llama's shapes (K x N:
// q / o 2048 x 2048, k / v 2048 x 256, gate / up 2048 x 5632, down 5632 x 2048, fused q|k|v 2048 x 2560,
// fused gate|up 2048 x 11264; fp16 / bf16 / fp32, int4 g32 asym and nf4:dq at --size² and the fused
// gate|up only), then int4 and nf4 again with QJOULE_CUDA_GEMV4=plain: bytes read per second and
// their fraction of the copy bandwidth.
void gemv_table(const Options& o, const CudaGpuInfo& gpu, double copy_bw) {
  fmt::print(
      "\nDecode GEMV (qjoule kernels), M = 1, K inputs x N outputs; 'alone': one forward_device call; 'in stream': "
      "'copies' calls back to back, per call (GB/s and 'of copy' from it); medians of >= {}\n",
      o.reps);
  fmt::print("{:<15} {:>11} {:<30} {:>6} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "format", "K x N", "kernel", "copies",
             "us alone", "us strm", "MB moved", "GB/s", "of copy");
  struct Row {
    const char* name;
    quant::FormatSpec format;
  };
  std::vector<Row> rows;
  const auto spec = [](const char* text) { return quant::parse_format_spec(text); };
  const auto wanted = [&o](const char* name) {
    return o.gemv_formats.empty() || o.gemv_formats.find(fmt::format(",{},", name)) != std::string::npos;
  };
  for (const char* name : kGemvFormats)
    if (wanted(name)) rows.push_back({name, spec(name)});
  const int64_t shapes[][2] = {{o.size, o.size}, {2048, 2048}, {2048, 256},  {2048, 5632},
                               {5632, 2048},     {2048, 2560}, {2048, 11264}};
  for (const Row& r : rows) {
    // The wide formats at the two shapes that tell their rate; the 4-bit and INT8 ones at every shape.
    const bool wide = r.format.format == quant::Format::fp16 || r.format.format == quant::Format::bf16 ||
                      r.format.format == quant::Format::fp32;
    const bool variant = std::string(r.name).find(':') != std::string::npos;
    for (const auto& shape : shapes) {
      if ((wide || variant) && shape[0] != o.size && shape[1] != 11264) continue;
      gemv_row(o, gpu, copy_bw, r.name, r.format, shape[0], shape[1]);
    }
  }
  // The other 4-bit GEMV (QJOULE_CUDA_GEMV4=plain: one warp a row pair), beside the default's rows.
  const char* saved = std::getenv("QJOULE_CUDA_GEMV4");
  const std::string before = saved != nullptr ? saved : "";
  setenv("QJOULE_CUDA_GEMV4", "plain", 1);
  for (const char* name : {"int4", "nf4"})
    if (wanted(name) && wanted("plain"))
      for (const auto& shape : shapes) gemv_row(o, gpu, copy_bw, name, spec(name), shape[0], shape[1]);
  if (saved != nullptr) {
    setenv("QJOULE_CUDA_GEMV4", before.c_str(), 1);
  } else {
    unsetenv("QJOULE_CUDA_GEMV4");
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
    const double copy_bw = copy_bandwidth(o, gpu);
    std::fflush(stdout);
    gemv_table(o, gpu, copy_bw);
    if (!o.gemv_only) gemm_table(o, gpu);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}

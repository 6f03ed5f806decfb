// Measurements behind microbench/cuda_gemm_peak: cuBLASLt matrix-product throughput, device copy
// bandwidth, timed forward calls of CUDA linear layers, and the GPU's dense tensor-core peak to
// compare with. Every timing runs on the default stream of the current device, between CUDA events,
// after warm-up calls; each returns one time per repetition. In builds without the CUDA backend the
// timing functions throw qjoule::Error saying so; dense_tensor_peak works everywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qjoule/quant/format.h"

namespace qjoule::kernels {

class CudaLinear;

struct CudaGpuInfo {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;
  int sm_count = 0;
  int clock_mhz = 0;  // the peak SM clock the driver reports
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
};

// Properties of GPU `device`; throws qjoule::Error when it cannot be read.
CudaGpuInfo cuda_gpu_info(int device);

// A dense (no sparsity) tensor-core peak in TFLOP/s (TOP/s for int8) and where it came from.
struct DensePeak {
  double tops = 0.0;   // 0: unknown for this GPU / precision
  std::string source;  // "datasheet: H100 SXM5", "estimate: 132 SMs x 1980 MHz x 4096 FLOP/clk/SM", or why unknown
};
// precision: tf32, fp16, bf16, int8 or fp8. The vendor's datasheet figure for the GPUs it
// knows by name (H100 SXM / PCIe, H200, A100); otherwise an estimate from SM count × reported clock ×
// the architecture's dense per-SM rate (sm_75, 80, 86, 89, 90; data-centre rates with FP32
// accumulation, so GeForce parts, which halve them, read low), or 0 when it has none.
DensePeak dense_tensor_peak(const CudaGpuInfo& gpu, quant::Format precision);

// cuBLASLt alone: D[m, n] = B[m, k] · A[n, k]ᵀ in `precision` (fp32, tf32, fp16, bf16, int8,
// fp8) on random operands, times in ms (reps ≥ 1).
std::vector<float> time_cublaslt_gemm(quant::Format precision, int64_t m, int64_t n, int64_t k, int reps,
                                      int device = 0);

// A device-to-device copy of `bytes`; times in ms. Bandwidth = 2 · bytes / time (read + written).
std::vector<float> time_device_copy(std::size_t bytes, int reps, int device = 0);

// layers[r % layers.size()]->forward_device(x, m, y) for repetition r (rotating through several
// copies keeps the weights out of L2); all layers must share one shape and device; times in ms.
// calls > 1: each repetition runs that many forwards back to back (rotating on), timed together and
// divided by calls: the launch overlaps the previous call's tail, as in a stream of decode kernels.
std::vector<float> time_linear_forward(const std::vector<const CudaLinear*>& layers, int64_t m, int reps,
                                       int calls = 1);

// The median of a list of times (the mean of the middle two for an even count).
double median_of(std::vector<float> times);

}  // namespace qjoule::kernels

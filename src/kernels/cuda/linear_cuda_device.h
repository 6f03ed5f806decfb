// The device side of the CUDA linear layers (qjoule/kernels/linear_cuda.h), compiled by nvcc. The
// C++ side (linear_cuda.cpp) validates the format, quantizes and pads the weights on the host with
// the same quantizers as the CPU layers, and hands them over here; errors come back as text (empty
// on success) so that nvcc never parses fmt, and the C++ side turns them into qjoule::Error.
//
// Everything below the "host helpers" line runs without a GPU and is tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace qjoule::kernels::cuda_detail {

// Matrix products that run in cuBLASLt (y = x · Wᵀ with W [out, in] row-major, "TN" in BLAS terms).
//   f32   FP32 × FP32, FP32 accumulation, no tensor cores (CUBLAS_COMPUTE_32F)
//   tf32  FP32 operands rounded to TF32 by the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32)
//   f16   FP16 × FP16 → FP32 (activations converted on the device)
//   bf16  BF16 × BF16 → FP32 (activations converted on the device)
//   s8    INT8 × INT8 → INT32 (CUBLAS_COMPUTE_32I), dequantized by qjoule's epilogue kernel
//   e4m3  FP8 E4M3 × E4M3 → FP32, scaled by qjoule's epilogue kernel (sm_89 and newer)
enum class GemmKind { f32, tf32, f16, bf16, s8, e4m3 };

// 4-bit weight-only formats (layouts: qjoule/quant/formats.h), uploaded exactly as the quantizers
// write them.
enum class PackedKind { int4_sym, int4_asym, nf4, nf4dq, mxfp4, nvfp4 };

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
  int clock_khz = 0;  // the peak SM clock the driver reports
  int64_t l2_bytes = 0;
  int64_t total_bytes = 0;
};
std::string query_device(int device, DeviceInfo& info);

// Weights of a cuBLASLt layer. s8 and e4m3 matrices are zero-padded to multiples of kLowpPad in both
// dimensions (rows ≥ out, cols ≥ in), so that every dimension cuBLASLt sees meets the INT8 / FP8
// kernels' alignment rules; padding adds zero terms only.
struct DenseWeights {
  GemmKind kind = GemmKind::f32;
  int64_t out = 0, in = 0;        // the layer's shape
  int64_t rows = 0, cols = 0;     // the device matrix [rows, cols]
  std::vector<uint8_t> data;      // rows · cols elements: FP32, FP16 / BF16 bits, s8 or E4M3 codes
  std::vector<float> row_scales;  // s8 / e4m3: [rows] dequantization scale of each weight row
};

// Weights of a 4-bit weight-only layer.
struct PackedWeights {
  PackedKind kind = PackedKind::int4_sym;
  int group_size = 0;  // weights per block along `in`: int4 32 / 64 / 128, nf4 64, mxfp4 32, nvfp4 16
  int64_t out = 0, in = 0;
  std::vector<uint8_t> blocks;       // the BlockMatrix's blocks, byte for byte
  std::vector<float> absmax_scales;  // nf4dq: one FP32 scale per 256 absmax codes
  float absmax_mean = 0.0f;          // nf4dq
  float tensor_scale = 1.0f;         // nvfp4: s_t
  // The tables every device gets once (ensure_tables), whatever the first layer's format:
  std::vector<float> nf4_table;    // quant::kNf4Table (16 values)
  std::vector<float> dynamic_map;  // quant::dynamic_map_signed() (256 values)
  std::vector<float> e2m1_table;   // quant::kE2M1Table (16 values)
  std::vector<float> e8m0_map;     // quant::e8m0_value of each byte (256 values; 255 is NaN, never written)
  std::vector<float> e4m3_map;     // quant::e4m3_value of each byte (256 values)
  bool split_gemv = true;          // decode through gemv_split_kernel, else gemv_kernel (gemv4_split; never nvfp4)
};

class DeviceLinear {
 public:
  virtual ~DeviceLinear() = default;
  // y[m, out] = x[m, in] · Wᵀ + b, device pointers (16-byte aligned), enqueued on `stream`.
  virtual std::string forward(const float* x, int64_t m, float* y, CUstream_st* stream) = 0;
  // The same with host pointers: copies x in, runs on the default stream, copies y out, synchronizes.
  virtual std::string forward_host(const float* x, int64_t m, float* y) = 0;
  // Device bytes of weights, scales and bias (not the working buffers of a forward call).
  virtual std::size_t bytes_held() const = 0;
};

std::string make_dense_linear(const DenseWeights& weights, const std::vector<float>& bias, int device,
                              std::unique_ptr<DeviceLinear>& result);
std::string make_packed_linear(const PackedWeights& weights, const std::vector<float>& bias, int device,
                               std::unique_ptr<DeviceLinear>& result);

// ---- host helpers (no GPU needed) ---------------------------------------------------------------

// Which 4-bit decode GEMV runs (gemv_packed.cuh): gemv_split_kernel (QJOULE_CUDA_GEMV4 unset or
// "split": true; kernel path "qjoule:cuda:int4_gemv_split") or gemv_kernel, one warp a row pair
// ("plain": false; "qjoule:cuda:int4_gemv"), kept to compare. Anything else is an error.
bool gemv4_split();

// Up to this many rows (tokens), the 4-bit layers run their GEMV kernel; above, the dequantize-to-FP16
// panel + cuBLASLt FP16 GEMM path.
constexpr int64_t kGemvMaxRows = 8;
// INT8 / FP8 matrices are padded to multiples of this in every dimension.
constexpr int64_t kLowpPad = 16;
// Bytes of the FP16 weight panel the 4-bit GEMM path dequantizes into (at most; at least 64 rows).
constexpr int64_t kPanelBytes = int64_t{32} << 20;

constexpr int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Rows of W per FP16 panel for a layer [out, in]: all of `out` when that fits in kPanelBytes, else
// the largest multiple of 64 that fits (at least 64).
constexpr int64_t weight_panel_rows(int64_t out, int64_t in) {
  const int64_t fit = kPanelBytes / (2 * in);
  if (out <= fit) return out;
  const int64_t rows = fit / 64 * 64;
  return rows < 64 ? (out < 64 ? out : 64) : rows;
}

// The GEMV kernel variant (activation rows it holds in registers: 1, 2, 4 or 8) that serves m rows,
// 1 ≤ m ≤ kGemvMaxRows.
constexpr int gemv_rows_variant(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// FP8 E4M3 ("fn": no infinities, largest finite 448) conversions, the CUDA headers' own
// (__nv_cvt_float_to_fp8 with saturation to ±448, round to nearest even; NaN → 0x7F).
constexpr float kE4m3Max = 448.0f;
uint8_t fp32_to_e4m3(float v);
float e4m3_to_fp32(uint8_t code);

// Symmetric E4M3 scaling of one set of values with largest magnitude `amax`, exactly as the device
// kernel computes it: inv = 448 / amax, scale = amax / 448, code = e4m3(v · inv); inv = scale = 0 when
// amax < 1e-30 (every code 0).
void e4m3_scales(float amax, float& inv, float& scale);
// Per-row E4M3 quantization [rows, cols] → q [rows, ld] (columns cols..ld-1 zero) and scales [rows]:
// the host twin of the activation kernel. NaN / Inf are not checked here.
void quantize_rows_e4m3(const float* v, int64_t rows, int64_t cols, int64_t ld, uint8_t* q, float* scales);

}  // namespace qjoule::kernels::cuda_detail

// The cuBLASLt layers (fp32, tf32, fp16, bf16, int8, fp8): weights resident on the device, the
// activation conversion / per-token quantization kernels, the matrix product in cuBLASLt and, for
// int8 and fp8, the dequantization epilogue kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemv_dense_cuda.h"
#include "kernels/cuda/linear_cuda_device.h"
#include "kernels/cuda/lt_gemm.cuh"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kS8Max = 127;
using element::symmetric_scales;  // the CPU's per-row scales (qjoule/quant/element_math.h)

// ---- scales shared by the host twin and the kernels -----------------------------------------------

__host__ __device__ inline uint8_t e4m3_code(float v, float inv) {
#ifdef __CUDA_ARCH__
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(v, inv), __NV_SATFINITE, __NV_E4M3));
#else
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v * inv, __NV_SATFINITE, __NV_E4M3));
#endif
}

// ---- kernels ----------------------------------------------------------------------------------------

constexpr int kConvertThreads = 256;
constexpr int kQuantizeThreads = 256;
constexpr int kEpilogueThreads = 256;

template <class T>
__device__ inline T from_float(float v);
template <>
__device__ inline __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// x [n] FP32 → FP16 / BF16 (round to nearest even).
template <class T>
__global__ void convert_kernel(const float* __restrict__ x, T* __restrict__ out, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = from_float<T>(x[i]);
}

// Block-wide max of |v| and "all finite" over one row.
__device__ inline void row_amax(const float* __restrict__ row, int64_t cols, float& amax, bool& finite) {
  __shared__ float warp_max[kQuantizeThreads / 32];
  float a = 0.0f;
  bool ok = true;
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) {
    const float v = row[k];
    ok = ok && isfinite(v);
    a = fmaxf(a, fabsf(v));
  }
  for (int offset = 16; offset > 0; offset >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = a;
  finite = __syncthreads_and(ok) != 0;  // also the barrier for warp_max
  a = 0.0f;
  for (int w = 0; w < kQuantizeThreads / 32; ++w) a = fmaxf(a, warp_max[w]);
  amax = a;
}

// One block per row of x [m, in]: symmetric per-token codes into q [m, ld] (columns in..ld-1 zero)
// and the row's scale. s8: the CPU's quantize_rows_symmetric_s8 formulas (qmax 127); E4M3: qmax 448
// with saturation. A row holding NaN or Inf gets the scale NaN, so its outputs are NaN.
template <bool kE4m3>
__global__ void __launch_bounds__(kQuantizeThreads)
    quantize_rows_kernel(const float* __restrict__ x, int64_t in, int64_t ld, uint8_t* __restrict__ q,
                         float* __restrict__ scales) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * in;
  float amax = 0.0f;
  bool finite = true;
  row_amax(xr, in, amax, finite);
  float inv = 0.0f, scale = 0.0f;
  symmetric_scales(amax, kE4m3 ? kE4m3Max : static_cast<float>(kS8Max), inv, scale);
  uint8_t* qr = q + row * ld;
  for (int64_t k = threadIdx.x; k < ld; k += blockDim.x) {
    uint8_t code = 0;
    if (k < in) {
      if constexpr (kE4m3) {
        code = e4m3_code(xr[k], inv);
      } else {
        code = static_cast<uint8_t>(static_cast<int8_t>(element::s8_code(xr[k], inv)));
      }
    }
    qr[k] = code;
  }
  if (threadIdx.x == 0) scales[row] = finite ? scale : __int_as_float(0x7fc00000);
}

__device__ inline float acc_to_float(int32_t v) { return __int2float_rn(v); }
__device__ inline float acc_to_float(float v) { return v; }

// y[i, o] = float(acc[i, o]) · (sx[i] · sw[o]) + b[o] for i < m, o < out, with acc [m_pad, ld]:
// the expression of the CPU W8A8 layer's dequantize (kernels/cpu/linear_int8_w8a8_onednn.cpp).
template <class Acc>
__global__ void dequantize_kernel(const Acc* __restrict__ acc, int64_t ld, int64_t m, int64_t out,
                                  const float* __restrict__ sx, const float* __restrict__ sw,
                                  const float* __restrict__ bias, float* __restrict__ y) {
  const int64_t n = m * out;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    const int64_t i = idx / out, o = idx - i * out;
    float v = __fmul_rn(acc_to_float(acc[i * ld + o]), __fmul_rn(sx[i], sw[o]));
    if (bias != nullptr) v = __fadd_rn(v, bias[o]);
    y[idx] = v;
  }
}

// ---- the layer --------------------------------------------------------------------------------------

class DenseLinear final : public LockedDeviceLinear {
 public:
  std::string init(const DenseWeights& w, const std::vector<float>& bias, int device) {
    device_ = device;
    kind_ = w.kind;
    out_ = w.out;
    in_ = w.in;
    rows_ = w.rows;
    cols_ = w.cols;
    DeviceGuard guard(device);
    std::string error = guard.error();
    if (error.empty()) error = lt_context(context_);
    if (error.empty()) error = weights_.upload(w.data.data(), w.data.size(), "cudaMemcpy of the weights");
    if (error.empty() && !w.row_scales.empty())
      error = row_scales_.upload(w.row_scales.data(), w.row_scales.size() * sizeof(float), "cudaMemcpy of the scales");
    if (error.empty() && !bias.empty())
      error = bias_.upload(bias.data(), bias.size() * sizeof(float), "cudaMemcpy of the bias");
    return error;
  }

  std::size_t bytes_held() const override { return weights_.bytes() + row_scales_.bytes() + bias_.bytes(); }

 private:
  std::string forward_locked(const float* x, int64_t m, float* y, cudaStream_t s) override {
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0)
      return "x and y must be 16-byte aligned device pointers";
    const float* bias = bias_.bytes() > 0 ? bias_.as<float>() : nullptr;
    if (dense_gemv_applies(kind_, m, in_))
      return gemv_dense_cuda(kind_, weights_.as<void>(), cols_,
                             row_scales_.bytes() > 0 ? row_scales_.as<float>() : nullptr, x, m, out_, in_, bias, y, s);
    switch (kind_) {
      case GemmKind::f32:
      case GemmKind::tf32: {
        LtPlan* plan = nullptr;
        if (std::string e = plan_for(m, bias, plan); !e.empty()) return e;
        return plan->run(*context_, weights_.as<void>(), x, y, s);
      }
      case GemmKind::f16:
      case GemmKind::bf16: {
        const int64_t n = m * in_;
        if (std::string e =
                activations_.reserve(static_cast<std::size_t>(n) * 2, "cudaMalloc of FP16/BF16 activations");
            !e.empty())
          return e;
        if (kind_ == GemmKind::f16) {
          convert_kernel<__half>
              <<<grid_for(n, kConvertThreads), kConvertThreads, 0, s>>>(x, activations_.as<__half>(), n);
        } else {
          convert_kernel<__nv_bfloat16>
              <<<grid_for(n, kConvertThreads), kConvertThreads, 0, s>>>(x, activations_.as<__nv_bfloat16>(), n);
        }
        if (std::string e = launch_error("convert_kernel"); !e.empty()) return e;
        LtPlan* plan = nullptr;
        if (std::string e = plan_for(m, bias, plan); !e.empty()) return e;
        return plan->run(*context_, weights_.as<void>(), activations_.as<void>(), y, s);
      }
      case GemmKind::s8:
      case GemmKind::e4m3: return forward_lowp(x, m, y, s, bias);
    }
    return "unknown GEMM kind";
  }

  // INT8 / FP8: per-token quantization into [m_pad, cols], cuBLASLt into acc [m_pad, rows], epilogue.
  std::string forward_lowp(const float* x, int64_t m, float* y, cudaStream_t s, const float* bias) {
    const int64_t m_pad = round_up(m, kLowpPad);
    const bool fp8 = kind_ == GemmKind::e4m3;
    if (std::string e = activations_.reserve(static_cast<std::size_t>(m_pad * cols_), "cudaMalloc of activation codes");
        !e.empty())
      return e;
    if (std::string e = activation_scales_.reserve(static_cast<std::size_t>(m_pad) * sizeof(float),
                                                   "cudaMalloc of activation scales");
        !e.empty())
      return e;
    if (std::string e =
            accumulators_.reserve(static_cast<std::size_t>(m_pad * rows_) * 4, "cudaMalloc of accumulators");
        !e.empty())
      return e;
    if (fp8) {
      quantize_rows_kernel<true><<<static_cast<unsigned>(m), kQuantizeThreads, 0, s>>>(
          x, in_, cols_, activations_.as<uint8_t>(), activation_scales_.as<float>());
    } else {
      quantize_rows_kernel<false><<<static_cast<unsigned>(m), kQuantizeThreads, 0, s>>>(
          x, in_, cols_, activations_.as<uint8_t>(), activation_scales_.as<float>());
    }
    if (std::string e = launch_error("quantize_rows_kernel"); !e.empty()) return e;
    LtPlan* plan = nullptr;
    if (std::string e = plan_for(m_pad, nullptr, plan); !e.empty()) return e;
    if (std::string e = plan->run(*context_, weights_.as<void>(), activations_.as<void>(), accumulators_.as<void>(), s);
        !e.empty())
      return e;
    const unsigned grid = grid_for(m * out_, kEpilogueThreads);
    if (fp8) {
      dequantize_kernel<float><<<grid, kEpilogueThreads, 0, s>>>(
          accumulators_.as<float>(), rows_, m, out_, activation_scales_.as<float>(), row_scales_.as<float>(), bias, y);
    } else {
      dequantize_kernel<int32_t><<<grid, kEpilogueThreads, 0, s>>>(accumulators_.as<int32_t>(), rows_, m, out_,
                                                                   activation_scales_.as<float>(),
                                                                   row_scales_.as<float>(), bias, y);
    }
    return launch_error("dequantize_kernel");
  }

  // The plan for `cols` activation rows (made once per distinct count). f32 / tf32 read x and all but
  // s8 / e4m3 write y straight from / to the caller's memory, which is only known to be 16-byte aligned.
  std::string plan_for(int64_t cols, const float* bias, LtPlan*& plan) {
    auto& slot = plans_[cols];
    if (!slot) {
      auto fresh = std::make_unique<LtPlan>();
      const GemmDims dims{rows_, cols, cols_, cols_, cols_, rows_};
      const uint32_t alignment = kind_ == GemmKind::s8 || kind_ == GemmKind::e4m3 ? 256 : 16;
      if (std::string e = fresh->init(*context_, kind_, dims, bias, alignment); !e.empty()) {
        plans_.erase(cols);
        return e;
      }
      slot = std::move(fresh);
    }
    plan = slot.get();
    return {};
  }

  GemmKind kind_ = GemmKind::f32;
  int64_t rows_ = 0, cols_ = 0;
  LtContext* context_ = nullptr;
  DeviceMemory weights_, row_scales_, bias_;
  std::map<int64_t, std::unique_ptr<LtPlan>> plans_;
  DeviceMemory activations_, activation_scales_, accumulators_;
};

}  // namespace

std::string query_device(int device, DeviceInfo& info) {
  cudaDeviceProp p{};
  cudaError_t err = cudaGetDeviceProperties(&p, device);
  if (err != cudaSuccess) return describe(err, "cudaGetDeviceProperties");
  info.name = p.name;
  info.major = p.major;
  info.minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  info.l2_bytes = p.l2CacheSize;
  info.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  err = cudaDeviceGetAttribute(&info.clock_khz, cudaDevAttrClockRate, device);
  if (err != cudaSuccess) info.clock_khz = 0;
  return {};
}

std::string make_dense_linear(const DenseWeights& weights, const std::vector<float>& bias, int device,
                              std::unique_ptr<DeviceLinear>& result) {
  if (weights.data.size() != static_cast<std::size_t>(weights.rows * weights.cols) * gemm_element_bytes(weights.kind))
    return "internal: weight bytes do not match the device matrix";
  auto layer = std::make_unique<DenseLinear>();
  if (std::string e = layer->init(weights, bias, device); !e.empty()) return e;
  result = std::move(layer);
  return {};
}

uint8_t fp32_to_e4m3(float v) { return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)); }

float e4m3_to_fp32(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

void e4m3_scales(float amax, float& inv, float& scale) { symmetric_scales(amax, kE4m3Max, inv, scale); }

void quantize_rows_e4m3(const float* v, int64_t rows, int64_t cols, int64_t ld, uint8_t* q, float* scales) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = v + r * cols;
    float amax = 0.0f;
    for (int64_t k = 0; k < cols; ++k) amax = std::fmax(amax, std::fabs(row[k]));
    float inv = 0.0f;
    symmetric_scales(amax, kE4m3Max, inv, scales[r]);
    for (int64_t k = 0; k < ld; ++k) q[r * ld + k] = k < cols ? e4m3_code(row[k], inv) : uint8_t{0};
  }
}

}  // namespace qjoule::kernels::cuda_detail

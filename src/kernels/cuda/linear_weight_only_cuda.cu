// The 4-bit weight-only layers (int4 sym / asym with G = 32, 64, 128; nf4; nf4 with double-quantized
// absmax) on the GPU. The packed blocks are the CPU quantizers' output, byte for byte
// (qjoule/quant/formats.h); the kernels read them in place.
//
//  * m ≤ kGemvMaxRows (decode): gemv_kernel. A block of 128 threads computes kGemvRows consecutive
//    outputs for all m rows; each thread takes 8 weights (4 bytes of nibbles) of each of those rows at
//    a time, decodes them in registers and multiplies them into the m activation rows it loaded once
//    for all kGemvRows weight rows (FP32 FMA); the block reduces through shuffles and shared memory.
//    Nothing but y is written.
//  * m > kGemvMaxRows (prefill / batch): the activations are converted to FP16 once, then for each
//    panel of weight_panel_rows() output rows dequant_panel_kernel writes the panel's weights as FP16
//    [rows, in] (each value the CPU reference's dequantized FP32 weight, rounded to nearest FP16) and
//    cuBLASLt multiplies it (FP16 tensor cores, FP32 accumulation and output, bias in its epilogue)
//    straight into the panel's columns of y. Only one panel of FP16 weights exists at a time.
#include <cuda_fp16.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/linear_cuda_device.h"
#include "kernels/cuda/lt_gemm.cuh"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

// The NF4 table and bitsandbytes' dynamic map, copied to each device once (ensure_tables) from the
// host's quant::kNf4Table and quant::dynamic_map_signed(); kernels copy them to shared memory.
__constant__ float c_nf4_table[16];
__constant__ float c_dynamic_map[256];

// What a kernel needs besides the blocks.
struct Aux {
  const float* absmax_scales;  // nf4dq
  float absmax_mean;           // nf4dq
  int64_t blocks_per_row;      // in / block size
};

// Four bytes of nibbles at p, as a little-endian word, with loads as wide as the alignment A allows.
template <int A>
__device__ inline uint32_t load_u32(const uint8_t* p) {
  if constexpr (A == 4) {
    return __ldg(reinterpret_cast<const unsigned int*>(p));
  } else if constexpr (A == 2) {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
    return uint32_t{__ldg(h)} | (uint32_t{__ldg(h + 1)} << 16);
  } else {
    return uint32_t{__ldg(p)} | (uint32_t{__ldg(p + 1)} << 8) | (uint32_t{__ldg(p + 2)} << 16) |
           (uint32_t{__ldg(p + 3)} << 24);
  }
}

// Element 2j of the 8 weights sits in the high nibble of byte j, element 2j + 1 in its low nibble
// (formats.h's nibble order, element::nibble_of_word as the CPU tests it).
__device__ inline int nibble(uint32_t word, int e) { return element::nibble_of_word(word, e); }

constexpr int alignment_of(int block_bytes, int header_bytes) {
  return (block_bytes % 4 == 0 && header_bytes % 4 == 0) ? 4 : (block_bytes % 2 == 0 && header_bytes % 2 == 0) ? 2 : 1;
}

// Each format decodes the 8 weights k..k+7 (k % 8 == 0) of a row as v[e] · scale, where v · scale is
// exactly the CPU reference dequantizer's FP32 product.
template <int G, bool kAsym>
struct Int4Format {
  static constexpr int kBlock = G;
  static constexpr int kHeader = kAsym ? 4 : 2;  // FP16 d (+ zero byte + reserved byte)
  static constexpr int kBlockBytes = kHeader + G / 2;
  static constexpr int kAlign = alignment_of(kBlockBytes, kHeader);
  static constexpr bool kTable = false, kMap = false;
  __device__ static float decode8(const uint8_t* row, int64_t /*row_index*/, int64_t k, const Aux& /*aux*/,
                                  const float* /*table*/, const float* /*map*/, float v[8]) {
    const uint8_t* block = row + (k / G) * kBlockBytes;
    const float d = __half2float(__ushort_as_half(__ldg(reinterpret_cast<const unsigned short*>(block))));
    const int z = kAsym ? static_cast<int>(__ldg(block + 2)) : 8;
    const uint32_t word = load_u32<kAlign>(block + kHeader + (k % G) / 2);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = static_cast<float>(nibble(word, e) - z);
    return d;
  }
};

struct Nf4Format {
  static constexpr int kBlock = 64;
  static constexpr int kHeader = 4;  // FP32 absmax
  static constexpr int kBlockBytes = 36;
  static constexpr int kAlign = alignment_of(kBlockBytes, kHeader);
  static constexpr bool kTable = true, kMap = false;
  __device__ static float decode8(const uint8_t* row, int64_t /*row_index*/, int64_t k, const Aux& /*aux*/,
                                  const float* table, const float* /*map*/, float v[8]) {
    const uint8_t* block = row + (k / kBlock) * kBlockBytes;
    const float absmax = __ldg(reinterpret_cast<const float*>(block));
    const uint32_t word = load_u32<kAlign>(block + kHeader + (k % kBlock) / 2);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = table[nibble(word, e)];
    return absmax;
  }
};

struct Nf4DqFormat {
  static constexpr int kBlock = 64;
  static constexpr int kHeader = 1;  // 8-bit absmax code
  static constexpr int kBlockBytes = 33;
  static constexpr int kAlign = alignment_of(kBlockBytes, kHeader);
  static constexpr bool kTable = true, kMap = true;
  __device__ static float decode8(const uint8_t* row, int64_t row_index, int64_t k, const Aux& aux, const float* table,
                                  const float* map, float v[8]) {
    const int64_t kb = k / kBlock;
    const uint8_t* block = row + kb * kBlockBytes;
    const int64_t b = row_index * aux.blocks_per_row + kb;  // flattened block index (formats.h)
    // Nf4DqMatrix::absmax: map[code] · scale[b / 256] + mean, two FP32 roundings as on the CPU.
    const float absmax = element::nf4_dq_absmax(map[__ldg(block)], __ldg(aux.absmax_scales + b / 256), aux.absmax_mean);
    const uint32_t word = load_u32<kAlign>(block + kHeader + (k % kBlock) / 2);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = table[nibble(word, e)];
    return absmax;
  }
};

template <class F>
__device__ inline void load_tables(float* table, float* map) {
  if constexpr (F::kTable) {
    for (int i = threadIdx.x; i < 16; i += blockDim.x) table[i] = c_nf4_table[i];
  }
  if constexpr (F::kMap) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) map[i] = c_dynamic_map[i];
  }
  __syncthreads();
}

constexpr int kGemvThreads = 128;
constexpr int kGemvRows = 4;  // output features per block

// y[i, o] = Σ_k x[i, k] · Ŵ[o, k] + b[o] for i < m ≤ M, o in this block's kGemvRows.
template <class F, int M>
__global__ void __launch_bounds__(kGemvThreads)
    gemv_kernel(const uint8_t* __restrict__ w, const float* __restrict__ x, int64_t m, int64_t out, int64_t in, Aux aux,
                const float* __restrict__ bias, float* __restrict__ y) {
  __shared__ float table[16];
  __shared__ float map[256];
  __shared__ float partial[kGemvThreads / 32][kGemvRows * M];
  load_tables<F>(table, map);
  const int64_t o0 = int64_t{blockIdx.x} * kGemvRows;
  const int64_t row_bytes = aux.blocks_per_row * F::kBlockBytes;
  float acc[kGemvRows][M];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

  const int64_t chunks = in / 8;
#pragma unroll 2
  for (int64_t c = threadIdx.x; c < chunks; c += kGemvThreads) {
    const int64_t k = c * 8;
    float xv[M][8];
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i < m) {
        const float4 lo = __ldg(reinterpret_cast<const float4*>(x + i * in + k));
        const float4 hi = __ldg(reinterpret_cast<const float4*>(x + i * in + k + 4));
        xv[i][0] = lo.x, xv[i][1] = lo.y, xv[i][2] = lo.z, xv[i][3] = lo.w;
        xv[i][4] = hi.x, xv[i][5] = hi.y, xv[i][6] = hi.z, xv[i][7] = hi.w;
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[i][e] = 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int64_t o = o0 + r;
      if (o < out) {
        float v[8];
        const float s = F::decode8(w + o * row_bytes, o, k, aux, table, map, v);
#pragma unroll
        for (int i = 0; i < M; ++i) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(xv[i][e], v[e], dot);
          acc[r][i] = fmaf(dot, s, acc[r][i]);
        }
      }
    }
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float v = acc[r][i];
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r * M + i] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x < kGemvRows * M) {
    const int r = threadIdx.x / M, i = threadIdx.x % M;
    const int64_t o = o0 + r;
    if (i < m && o < out) {
      float sum = 0.0f;
      for (int wi = 0; wi < kGemvThreads / 32; ++wi) sum += partial[wi][threadIdx.x];
      if (bias != nullptr) sum += bias[o];
      y[i * out + o] = sum;
    }
  }
}

constexpr int kPanelThreads = 256;

// panel[r, k] = FP16(Ŵ[o0 + r, k]) for r < rows.
template <class F>
__global__ void __launch_bounds__(kPanelThreads)
    dequant_panel_kernel(const uint8_t* __restrict__ w, int64_t o0, int64_t rows, int64_t in, Aux aux,
                         __half* __restrict__ panel) {
  __shared__ float table[16];
  __shared__ float map[256];
  load_tables<F>(table, map);
  const int64_t row_bytes = aux.blocks_per_row * F::kBlockBytes;
  const int64_t chunks_per_row = in / 8;
  const int64_t total = rows * chunks_per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t r = idx / chunks_per_row, k = (idx - r * chunks_per_row) * 8;
    const int64_t o = o0 + r;
    float v[8];
    const float s = F::decode8(w + o * row_bytes, o, k, aux, table, map, v);
    __half2 h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) h[e] = __floats2half2_rn(__fmul_rn(v[2 * e], s), __fmul_rn(v[2 * e + 1], s));
    uint4 packed;
    memcpy(&packed, h, sizeof packed);
    *reinterpret_cast<uint4*>(panel + r * in + k) = packed;
  }
}

__global__ void to_half_kernel(const float* __restrict__ x, __half* __restrict__ out, int64_t n) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = __float2half_rn(x[i]);
}

// Copies the tables to the current device once.
std::string ensure_tables(const PackedWeights& w) {
  static std::mutex mutex;
  static std::map<int, bool> done;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return describe(err, "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  if (done[device]) return {};
  if (w.nf4_table.size() != 16 || w.dynamic_map.size() != 256)
    return "internal: the NF4 table or dynamic map is missing";
  err = cudaMemcpyToSymbol(c_nf4_table, w.nf4_table.data(), 16 * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(c_dynamic_map, w.dynamic_map.data(), 256 * sizeof(float));
  if (err != cudaSuccess) return describe(err, "cudaMemcpyToSymbol of the NF4 tables");
  done[device] = true;
  return {};
}

class PackedLinear final : public LockedDeviceLinear {
 public:
  std::string init(const PackedWeights& w, const std::vector<float>& bias, int device) {
    device_ = device;
    kind_ = w.kind;
    group_ = w.group_size;
    out_ = w.out;
    in_ = w.in;
    mean_ = w.absmax_mean;
    panel_rows_ = weight_panel_rows(out_, in_);
    DeviceGuard guard(device);
    std::string error = guard.error();
    if (error.empty()) error = lt_context(context_);
    if (error.empty()) error = ensure_tables(w);
    if (error.empty()) error = blocks_.upload(w.blocks.data(), w.blocks.size(), "cudaMemcpy of the weight blocks");
    if (error.empty() && !w.absmax_scales.empty())
      error = absmax_scales_.upload(w.absmax_scales.data(), w.absmax_scales.size() * sizeof(float),
                                    "cudaMemcpy of the absmax scales");
    if (error.empty() && !bias.empty())
      error = bias_.upload(bias.data(), bias.size() * sizeof(float), "cudaMemcpy of the bias");
    extra_bytes_ = kind_ == PackedKind::nf4dq ? sizeof(float) : 0;  // the absmax mean, a kernel argument
    return error;
  }

  std::size_t bytes_held() const override {
    return blocks_.bytes() + absmax_scales_.bytes() + extra_bytes_ + bias_.bytes();
  }

 private:
  std::string forward_locked(const float* x, int64_t m, float* y, cudaStream_t s) override {
    if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0)
      return "x and y must be 16-byte aligned device pointers";
    switch (kind_) {
      case PackedKind::int4_sym:
        if (group_ == 32) return run<Int4Format<32, false>>(x, m, y, s);
        if (group_ == 64) return run<Int4Format<64, false>>(x, m, y, s);
        return run<Int4Format<128, false>>(x, m, y, s);
      case PackedKind::int4_asym:
        if (group_ == 32) return run<Int4Format<32, true>>(x, m, y, s);
        if (group_ == 64) return run<Int4Format<64, true>>(x, m, y, s);
        return run<Int4Format<128, true>>(x, m, y, s);
      case PackedKind::nf4: return run<Nf4Format>(x, m, y, s);
      case PackedKind::nf4dq: return run<Nf4DqFormat>(x, m, y, s);
    }
    return "unknown 4-bit format";
  }

  template <class F>
  std::string run(const float* x, int64_t m, float* y, cudaStream_t s) {
    const Aux aux{absmax_scales_.bytes() > 0 ? absmax_scales_.as<float>() : nullptr, mean_, in_ / F::kBlock};
    const float* bias = bias_.bytes() > 0 ? bias_.as<float>() : nullptr;
    const uint8_t* w = blocks_.as<uint8_t>();
    if (m <= kGemvMaxRows) {
      const unsigned grid = static_cast<unsigned>((out_ + kGemvRows - 1) / kGemvRows);
      switch (gemv_rows_variant(m)) {
        case 1: gemv_kernel<F, 1><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, aux, bias, y); break;
        case 2: gemv_kernel<F, 2><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, aux, bias, y); break;
        case 4: gemv_kernel<F, 4><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, aux, bias, y); break;
        default: gemv_kernel<F, 8><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, aux, bias, y); break;
      }
      return launch_error("gemv_kernel");
    }
    const int64_t n = m * in_;
    if (std::string e = act16_.reserve(static_cast<std::size_t>(n) * 2, "cudaMalloc of FP16 activations"); !e.empty())
      return e;
    if (std::string e = panel_.reserve(static_cast<std::size_t>(panel_rows_ * in_) * 2, "cudaMalloc of the FP16 panel");
        !e.empty())
      return e;
    to_half_kernel<<<grid_for(n, 256), 256, 0, s>>>(x, act16_.as<__half>(), n);
    if (std::string e = launch_error("to_half_kernel"); !e.empty()) return e;
    for (int64_t o0 = 0; o0 < out_; o0 += panel_rows_) {
      const int64_t rows = out_ - o0 < panel_rows_ ? out_ - o0 : panel_rows_;
      dequant_panel_kernel<F><<<grid_for(rows * (in_ / 8), kPanelThreads), kPanelThreads, 0, s>>>(w, o0, rows, in_, aux,
                                                                                                  panel_.as<__half>());
      if (std::string e = launch_error("dequant_panel_kernel"); !e.empty()) return e;
      LtPlan* plan = nullptr;
      if (std::string e = plan_for(m, o0, rows, bias, plan); !e.empty()) return e;
      if (std::string e = plan->run(*context_, panel_.as<void>(), act16_.as<void>(), y + o0, s); !e.empty()) return e;
    }
    return {};
  }

  std::string plan_for(int64_t m, int64_t o0, int64_t rows, const float* bias, LtPlan*& plan) {
    auto& slot = plans_[{m, o0}];
    if (!slot) {
      auto fresh = std::make_unique<LtPlan>();
      const GemmDims dims{rows, m, in_, in_, in_, out_};
      // D is the caller's y (+ o0), only known to be 16-byte aligned.
      if (std::string e = fresh->init(*context_, GemmKind::f16, dims, bias != nullptr ? bias + o0 : nullptr, 16);
          !e.empty()) {
        plans_.erase({m, o0});
        return e;
      }
      slot = std::move(fresh);
    }
    plan = slot.get();
    return {};
  }

  PackedKind kind_ = PackedKind::int4_sym;
  int group_ = 0;
  int64_t panel_rows_ = 0;
  float mean_ = 0.0f;
  std::size_t extra_bytes_ = 0;
  LtContext* context_ = nullptr;
  DeviceMemory blocks_, absmax_scales_, bias_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<LtPlan>> plans_;
  DeviceMemory act16_, panel_;
};

}  // namespace

std::string make_packed_linear(const PackedWeights& weights, const std::vector<float>& bias, int device,
                               std::unique_ptr<DeviceLinear>& result) {
  auto layer = std::make_unique<PackedLinear>();
  if (std::string e = layer->init(weights, bias, device); !e.empty()) return e;
  result = std::move(layer);
  return {};
}

}  // namespace qjoule::kernels::cuda_detail

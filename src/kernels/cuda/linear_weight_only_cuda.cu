// The 4-bit weight-only layers (int4 sym / asym with G = 32, 64, 128; nf4; nf4 with double-quantized
// absmax; mxfp4; nvfp4) on the GPU. The codes and scales are the CPU quantizers' output
// (qjoule/quant/formats.h), every byte kept, rearranged into planes on upload (Planar, to_planar) so that
// 128-bit loads read them.
//
//  * m ≤ kGemvMaxRows (decode): gemv_split_kernel (gemv_packed.cuh: a row's words split across a block's
//    warps, each word scaled by its own block's scale), or with QJOULE_CUDA_GEMV4=plain gemv_kernel: each
//    warp computes kGemvRowsPerWarp consecutive outputs for all m rows; each lane reads 16 bytes (32 codes)
//    of each of its rows per step, four steps in flight, decodes them in registers and multiplies them into
//    the m activation rows (FP32 FMA, the group's scale once per 32 codes); the warp reduces through
//    shuffles. nvfp4 never takes gemv_kernel: its 16-weight blocks are finer than a lane's 32 codes.
//    Nothing but y is written.
//  * m > kGemvMaxRows (prefill / batch): the activations are converted to FP16 once, then for each
//    panel of weight_panel_rows() output rows dequant_panel_kernel writes the panel's weights as FP16
//    [rows, in] (each value the CPU reference's dequantized FP32 weight, rounded to nearest FP16) and
//    cuBLASLt multiplies it (FP16 tensor cores, FP32 accumulation and output, bias in its epilogue)
//    straight into the panel's columns of y. Only one panel of FP16 weights exists at a time.
#include <cuda_fp16.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemv_packed.cuh"
#include "kernels/cuda/packed_planes.cuh"
#include "kernels/cuda/linear_cuda_device.h"
#include "kernels/cuda/lt_gemm.cuh"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels::cuda_detail {
namespace {

constexpr int kPanelThreads = 256;

// panel[r, k] = FP16(Ŵ[o0 + r, k]) for r < rows: 8 weights a thread.
template <class F>
__global__ void __launch_bounds__(kPanelThreads)
    dequant_panel_kernel(Planar p, int64_t o0, int64_t rows, int64_t in, __half* __restrict__ panel) {
  __shared__ float table[16];
  __shared__ float map[256];
  load_tables<F>(table, map);
  const int64_t chunks_per_row = in / 8;
  const int64_t total = rows * chunks_per_row;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t idx = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t r = idx / chunks_per_row, k = (idx - r * chunks_per_row) * 8;
    const int64_t o = o0 + r, g = k / F::kGroup;
    const float s = F::scale(p, o, g, map), z = F::offset(p, o, g);
    const uint32_t word = __ldg(reinterpret_cast<const unsigned int*>(p.codes + o * (in / 2) + k / 2));
    __half2 h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[e] = __floats2half2_rn(__fmul_rn(F::value(nibble(word, 2 * e), z, table), s),
                               __fmul_rn(F::value(nibble(word, 2 * e + 1), z, table), s));
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
  if (w.nf4_table.size() != 16 || w.dynamic_map.size() != 256 || w.e2m1_table.size() != 16 ||
      w.e8m0_map.size() != 256 || w.e4m3_map.size() != 256)
    return "internal: the NF4 / FP4 tables or maps are missing";
  err = cudaMemcpyToSymbol(c_nf4_table, w.nf4_table.data(), 16 * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(c_dynamic_map, w.dynamic_map.data(), 256 * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(c_e2m1_table, w.e2m1_table.data(), 16 * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(c_e8m0_map, w.e8m0_map.data(), 256 * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpyToSymbol(c_e4m3_map, w.e4m3_map.data(), 256 * sizeof(float));
  if (err != cudaSuccess) return describe(err, "cudaMemcpyToSymbol of the NF4 / FP4 tables");
  done[device] = true;
  return {};
}

// formats.h's blocks → the planes of Planar: codes [out, in / 2], scales [out, in / G] of
// scale_bytes each, zeros [out, in / G] (int4 asym). Every code and scale byte is copied, none changed.
// A block's header (the bytes before its codes): int4 sym d (2); int4 asym d, zero, reserved (4); nf4 absmax
// (4); nf4dq its code (1); mxfp4 E8M0 (1); nvfp4 E4M3 (1).
struct PlanarHost {
  std::vector<uint8_t> codes, scales, zeros;
};
std::string to_planar(const PackedWeights& w, PlanarHost& planar) {
  const bool asym = w.kind == PackedKind::int4_asym;
  const bool one_byte = w.kind == PackedKind::nf4dq || w.kind == PackedKind::mxfp4 || w.kind == PackedKind::nvfp4;
  const int header = w.kind == PackedKind::int4_sym ? 2 : one_byte ? 1 : 4;
  const int scale_bytes = w.kind == PackedKind::int4_sym || asym ? 2 : header;
  const int64_t block_bytes = header + w.group_size / 2;
  const int64_t groups = w.out * (w.in / w.group_size);
  if (w.group_size < 16 || w.in % w.group_size != 0 || static_cast<int64_t>(w.blocks.size()) != groups * block_bytes)
    return "internal: the 4-bit blocks do not match the layer's shape";
  planar.codes.resize(static_cast<std::size_t>(groups * (w.group_size / 2)));
  planar.scales.resize(static_cast<std::size_t>(groups * scale_bytes));
  if (asym) planar.zeros.resize(static_cast<std::size_t>(groups));
  for (int64_t b = 0; b < groups; ++b) {
    const uint8_t* block = w.blocks.data() + b * block_bytes;
    memcpy(planar.scales.data() + b * scale_bytes, block, static_cast<std::size_t>(scale_bytes));
    if (asym) planar.zeros[static_cast<std::size_t>(b)] = block[2];  // formats.h: d, zero, reserved, qs
    memcpy(planar.codes.data() + b * (w.group_size / 2), block + header, static_cast<std::size_t>(w.group_size / 2));
  }
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
    tensor_scale_ = w.tensor_scale;
    split_ = w.split_gemv;
    // gemv_kernel scales a lane's 32 codes by one block's scale: nvfp4's 16-weight blocks take the split GEMV
    // only (the plan names it so: linear_cuda.cpp).
    if (kind_ == PackedKind::nvfp4 && !split_) return "internal: nvfp4 runs the split 4-bit GEMV only";
    panel_rows_ = weight_panel_rows(out_, in_);
    DeviceGuard guard(device);
    std::string error = guard.error();
    if (error.empty()) error = lt_context(context_);
    if (error.empty()) error = ensure_tables(w);
    PlanarHost planar;
    if (error.empty()) error = to_planar(w, planar);
    if (error.empty()) error = codes_.upload(planar.codes.data(), planar.codes.size(), "cudaMemcpy of the 4-bit codes");
    if (error.empty()) error = scales_.upload(planar.scales.data(), planar.scales.size(), "cudaMemcpy of the scales");
    if (error.empty() && !planar.zeros.empty())
      error = zeros_.upload(planar.zeros.data(), planar.zeros.size(), "cudaMemcpy of the zero points");
    if (error.empty() && !w.absmax_scales.empty())
      error = absmax_scales_.upload(w.absmax_scales.data(), w.absmax_scales.size() * sizeof(float),
                                    "cudaMemcpy of the absmax scales");
    if (error.empty() && !bias.empty())
      error = bias_.upload(bias.data(), bias.size() * sizeof(float), "cudaMemcpy of the bias");
    // nf4dq's absmax mean and nvfp4's tensor scale: a kernel argument each.
    extra_bytes_ = kind_ == PackedKind::nf4dq || kind_ == PackedKind::nvfp4 ? sizeof(float) : 0;
    return error;
  }

  std::size_t bytes_held() const override {
    return codes_.bytes() + scales_.bytes() + zeros_.bytes() + absmax_scales_.bytes() + extra_bytes_ + bias_.bytes();
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
      case PackedKind::mxfp4: return run<Mxfp4Format>(x, m, y, s);
      case PackedKind::nvfp4: return run<Nvfp4Format>(x, m, y, s);
    }
    return "unknown 4-bit format";
  }

  template <class F>
  std::string run(const float* x, int64_t m, float* y, cudaStream_t s) {
    const Planar w{codes_.as<uint8_t>(),
                   scales_.as<void>(),
                   zeros_.bytes() > 0 ? zeros_.as<uint8_t>() : nullptr,
                   absmax_scales_.bytes() > 0 ? absmax_scales_.as<float>() : nullptr,
                   mean_,
                   in_ / F::kGroup,
                   tensor_scale_};
    const float* bias = bias_.bytes() > 0 ? bias_.as<float>() : nullptr;
    if (m <= kGemvMaxRows) {
      if (split_) {
        const auto grid = static_cast<unsigned>((out_ + kSplitRows - 1) / kSplitRows);
        switch (gemv_rows_variant(m)) {
          case 1: gemv_split_kernel<F, 1><<<grid, kSplitThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
          case 2: gemv_split_kernel<F, 2><<<grid, kSplitThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
          case 4: gemv_split_kernel<F, 4><<<grid, kSplitThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
          default: gemv_split_kernel<F, 8><<<grid, kSplitThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
        }
        return launch_error("gemv_split_kernel");
      }
      const unsigned grid = static_cast<unsigned>((out_ + kGemvRows - 1) / kGemvRows);
      switch (gemv_rows_variant(m)) {
        case 1: gemv_kernel<F, 1><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
        case 2: gemv_kernel<F, 2><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
        case 4: gemv_kernel<F, 4><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
        default: gemv_kernel<F, 8><<<grid, kGemvThreads, 0, s>>>(w, x, m, out_, in_, bias, y); break;
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
      dequant_panel_kernel<F>
          <<<grid_for(rows * (in_ / 8), kPanelThreads), kPanelThreads, 0, s>>>(w, o0, rows, in_, panel_.as<__half>());
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
  float tensor_scale_ = 1.0f;
  bool split_ = true;
  std::size_t extra_bytes_ = 0;
  LtContext* context_ = nullptr;
  DeviceMemory codes_, scales_, zeros_, absmax_scales_, bias_;
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

// The dense layers' decode GEMV (gemv_dense_cuda.cu): fp32, fp16, bf16 and int8 W8A8 products of up to
// kDenseGemvMaxRows activation rows, reading FP32 activations straight from the caller, no cuBLASLt.
// Device pointers, enqueued on `stream`; "" when the launch was accepted, else the error as one line.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/linear_cuda_device.h"

namespace qjoule::kernels::cuda_detail {

// y[m, out] = x[m, in] · Wᵀ + b with W [>= out, ld] of `kind` (s8: row_scales [>= out], the weight
// rows' dequantization scales); bias may be null. Only where dense_gemv_applies(kind, m, in).
std::string gemv_dense_cuda(GemmKind kind, const void* w, int64_t ld, const float* row_scales, const float* x,
                            int64_t m, int64_t out, int64_t in, const float* bias, float* y, CUstream_st* stream);

// ---- host helpers (no GPU needed) ---------------------------------------------------------------

// Up to this many activation rows the dense layers run the GEMV; above, cuBLASLt.
constexpr int64_t kDenseGemvMaxRows = 4;

// Whether the GEMV serves a product: m ≤ kDenseGemvMaxRows rows, a format it has (fp32, fp16, bf16,
// int8; not tf32 or fp8, whose numerics are the tensor cores'), and rows of x that its 16-byte loads
// cover exactly (in a multiple of 16 elements for INT8 weights, of 8 for FP16 / BF16, of 4 for FP32).
constexpr bool dense_gemv_applies(GemmKind kind, int64_t m, int64_t in) {
  if (m < 1 || m > kDenseGemvMaxRows || in <= 0) return false;
  switch (kind) {
    case GemmKind::f32: return in % 4 == 0;
    case GemmKind::f16:
    case GemmKind::bf16: return in % 8 == 0;
    case GemmKind::s8: return in % 16 == 0;
    default: return false;
  }
}

}  // namespace qjoule::kernels::cuda_detail

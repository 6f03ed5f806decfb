// The CUDA backend's rows (qjoule/kernels/backend_registry.h) with what make_linear_cuda needs to plan a
// layer of each format: a cuBLASLt product (and qjoule's decode GEMV where it has one for the type) or a
// 4-bit weight-only layer (qjoule's GEMV, cuBLASLt FP16 above it), the compute capability its kernels
// need, and cuBLASLt's path. Data only (src/kernels/cuda/cuda_backend_formats.cpp, built into every build).
#pragma once

#include <span>
#include <string_view>

#include "kernels/cuda/linear_cuda_device.h"
#include "qjoule/quant/format.h"

namespace qjoule::kernels::detail {

struct CudaFormatPlan {
  quant::Format format{};
  bool packed = false;                                      // 4-bit weight-only (int4, nf4)
  cuda_detail::GemmKind gemm = cuda_detail::GemmKind::f32;  // dense: the cuBLASLt product (packed: unused)
  int min_compute = 75;                                     // compute capability × 10
  std::string_view lt_path;                                 // dense: cuBLASLt's path ("cublaslt:f16:tensor_op")
  std::string_view gemv;                                    // dense: qjoule's decode GEMV ("f16"), "" for none
};

// The row of `format`, or nullptr.
const CudaFormatPlan* cuda_format_plan(quant::Format format);

}  // namespace qjoule::kernels::detail

// cuBLASLt matrix products for the CUDA linear layers and the GEMM benchmark.
//
// Shapes, in the layers' row-major terms: D[cols, rows] = B[cols, k] · A[rows, k]ᵀ (+ bias[rows]),
// i.e. y[m, out] = x[m, in] · W[out, in]ᵀ with rows = out and cols = m. In cuBLASLt's column-major
// terms that is D (rows × cols, ld ldd) = op(A)ᵀ · B with A stored k × rows (ld lda) and transposed,
// B stored k × cols (ld ldb): the "TN" layout that cuBLASLt's INT8 and FP8 kernels require.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/linear_cuda_device.h"

namespace qjoule::kernels::cuda_detail {

// One cuBLASLt handle and one workspace per device, created on first use and kept for the process.
// Every plan on a device shares the workspace: matrix products on one device must be ordered (one
// stream, or synchronized between streams).
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;  // NVIDIA's recommendation for Hopper
// The context of the current device.
std::string lt_context(LtContext*& context);

struct GemmDims {
  int64_t rows = 0, cols = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
};

// A matmul descriptor, its layouts and the algorithm cuBLASLt's heuristic picked, for one shape.
class LtPlan {
 public:
  LtPlan() = default;
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  // bias (device, FP32, [rows]) or nullptr; only f32 / tf32 / f16 / bf16 take it (cuBLASLt's
  // BIAS epilogue). s8 writes INT32, e4m3 FP32, both without bias (qjoule's epilogue applies it).
  // bd_alignment: the alignment in bytes that B and D (and C = D) are guaranteed to have; the
  // heuristic only picks algorithms that work with it (cuBLASLt assumes 256 otherwise). A is always
  // a cudaMalloc'd buffer of qjoule's own.
  std::string init(const LtContext& context, GemmKind kind, const GemmDims& dims, const float* bias,
                   uint32_t bd_alignment);
  std::string run(const LtContext& context, const void* a, const void* b, void* d, cudaStream_t stream) const;
  // cuBLASLt's numerical-implementation flags of the chosen algorithm (CUBLASLT_NUMERICAL_IMPL_FLAGS_*).
  uint64_t numerical_impl() const { return impl_flags_; }

 private:
  GemmKind kind_ = GemmKind::f32;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  uint64_t impl_flags_ = 0;
};

// Short name of a kind for messages: "f32", "tf32", "f16", "bf16", "s8", "e4m3".
const char* gemm_kind_name(GemmKind kind);

// Bytes per element of a GEMM operand of `kind`.
inline std::size_t gemm_element_bytes(GemmKind kind) {
  switch (kind) {
    case GemmKind::f32:
    case GemmKind::tf32: return 4;
    case GemmKind::f16:
    case GemmKind::bf16: return 2;
    case GemmKind::s8:
    case GemmKind::e4m3: return 1;
  }
  return 4;
}

}  // namespace qjoule::kernels::cuda_detail

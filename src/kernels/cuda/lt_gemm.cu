#include "kernels/cuda/lt_gemm.cuh"

#include <map>
#include <memory>
#include <mutex>

#include "kernels/cuda/cuda_common.cuh"

namespace qjoule::kernels::cuda_detail {
namespace {

struct KindTypes {
  cudaDataType_t ab;  // A and B
  cudaDataType_t d;   // C and D
  cublasComputeType_t compute;
  cudaDataType_t scale;  // alpha, beta
};

KindTypes types_of(GemmKind kind) {
  switch (kind) {
    case GemmKind::f32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case GemmKind::tf32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F};
    case GemmKind::f16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case GemmKind::bf16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case GemmKind::s8: return {CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, CUDA_R_32I};
    case GemmKind::e4m3: return {CUDA_R_8F_E4M3, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
  }
  return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
}

bool takes_bias(GemmKind kind) { return kind != GemmKind::s8 && kind != GemmKind::e4m3; }

std::string dims_text(GemmKind kind, const GemmDims& d) {
  return std::string(gemm_kind_name(kind)) + " D[" + std::to_string(d.rows) + " x " + std::to_string(d.cols) + "], k " +
         std::to_string(d.k) + " (lda " + std::to_string(d.lda) + ", ldb " + std::to_string(d.ldb) + ", ldd " +
         std::to_string(d.ldd) + ")";
}

// A preference with the workspace limit, destroyed on every path.
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  }
};

}  // namespace

const char* gemm_kind_name(GemmKind kind) {
  switch (kind) {
    case GemmKind::f32: return "f32";
    case GemmKind::tf32: return "tf32";
    case GemmKind::f16: return "f16";
    case GemmKind::bf16: return "bf16";
    case GemmKind::s8: return "s8";
    case GemmKind::e4m3: return "e4m3";
  }
  return "?";
}

std::string lt_context(LtContext*& context) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<LtContext>> contexts;  // kept for the process (see lt_gemm.cuh)
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return describe(err, "cudaGetDevice");
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = contexts[device];
  if (!slot) {
    auto fresh = std::make_unique<LtContext>();
    const cublasStatus_t st = cublasLtCreate(&fresh->handle);
    if (st != CUBLAS_STATUS_SUCCESS) return describe(st, "cublasLtCreate");
    err = cudaMalloc(&fresh->workspace, kLtWorkspaceBytes);
    if (err != cudaSuccess) {
      cublasLtDestroy(fresh->handle);
      return describe(err, "cudaMalloc of the cuBLASLt workspace");
    }
    fresh->workspace_bytes = kLtWorkspaceBytes;
    slot = std::move(fresh);
  }
  context = slot.get();
  return {};
}

LtPlan::~LtPlan() {
  if (d_ != nullptr) cublasLtMatrixLayoutDestroy(d_);
  if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
  if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
  if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
}

std::string LtPlan::init(const LtContext& context, GemmKind kind, const GemmDims& dims, const float* bias,
                         uint32_t bd_alignment) {
  kind_ = kind;
  const KindTypes t = types_of(kind);
  cublasStatus_t st = cublasLtMatmulDescCreate(&op_, t.compute, t.scale);
  if (st != CUBLAS_STATUS_SUCCESS) return describe(st, "cublasLtMatmulDescCreate");
  const int32_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b);
  if (st == CUBLAS_STATUS_SUCCESS && bias != nullptr && takes_bias(kind)) {
    const uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  }
  if (st != CUBLAS_STATUS_SUCCESS) return describe(st, "cublasLtMatmulDescSetAttribute");

  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  st = cublasLtMatrixLayoutCreate(&a_, t.ab, u(dims.k), u(dims.rows), dims.lda);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&b_, t.ab, u(dims.k), u(dims.cols), dims.ldb);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&d_, t.d, u(dims.rows), u(dims.cols), dims.ldd);
  if (st != CUBLAS_STATUS_SUCCESS) return describe(st, "cublasLtMatrixLayoutCreate");

  Preference pref;
  st = cublasLtMatmulPreferenceCreate(&pref.pref);
  const uint64_t workspace = context.workspace_bytes;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                              sizeof workspace);
  for (const auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                               CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref.pref, attribute, &bd_alignment, sizeof bd_alignment);
  }
  if (st != CUBLAS_STATUS_SUCCESS) return describe(st, "cublasLtMatmulPreference");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  st = cublasLtMatmulAlgoGetHeuristic(context.handle, op_, a_, b_, d_, d_, pref.pref, 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    return "cuBLASLt has no algorithm for " + dims_text(kind, dims) + " on this GPU" +
           (st != CUBLAS_STATUS_SUCCESS ? " (" + describe(st, "cublasLtMatmulAlgoGetHeuristic") + ")" : "");
  }
  algo_ = result.algo;
  std::size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo_, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &impl_flags_,
                                        sizeof impl_flags_, &written) != CUBLAS_STATUS_SUCCESS) {
    impl_flags_ = 0;
  }
  return {};
}

std::string LtPlan::run(const LtContext& context, const void* a, const void* b, void* d, cudaStream_t stream) const {
  cublasStatus_t st;
  if (kind_ == GemmKind::s8) {
    const int32_t alpha = 1, beta = 0;
    st = cublasLtMatmul(context.handle, op_, &alpha, a, a_, b, b_, &beta, d, d_, d, d_, &algo_, context.workspace,
                        context.workspace_bytes, stream);
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    st = cublasLtMatmul(context.handle, op_, &alpha, a, a_, b, b_, &beta, d, d_, d, d_, &algo_, context.workspace,
                        context.workspace_bytes, stream);
  }
  return st == CUBLAS_STATUS_SUCCESS ? std::string() : describe(st, "cublasLtMatmul");
}

}  // namespace qjoule::kernels::cuda_detail

// The CUDA backend's rows (cuda_format_plans.h): data only, compiled into every build (qjoule_kernels_cpu),
// so that a build without the CUDA backend knows what a GPU would run, and make_linear_cuda plans from
// the same rows.
#include <array>
#include <string>

#include <fmt/format.h>

#include "kernels/cpu/backend_rows.h"
#include "kernels/cuda/cuda_format_plans.h"
#include "kernels/cuda/gemv_dense_cuda.h"

namespace qjoule::kernels::detail {
namespace {

using cuda_detail::GemmKind;
using quant::Format;

// clang-format off
constexpr std::array<CudaFormatPlan, 10> kPlans = {{
  // format      packed gemm             sm   cuBLASLt path               decode GEMV
  {Format::fp32, false, GemmKind::f32,  75, "cublaslt:f32",             "f32"},
  {Format::bf16, false, GemmKind::bf16, 80, "cublaslt:bf16:tensor_op",  "bf16"},
  {Format::fp16, false, GemmKind::f16,  75, "cublaslt:f16:tensor_op",   "f16"},
  {Format::int8, false, GemmKind::s8,   75, "cublaslt:s8:tensor_op",    "s8"},
  {Format::int4, true,  GemmKind::f32,  75, "",                         ""},
  {Format::nf4,  true,  GemmKind::f32,  75, "",                         ""},
  {Format::tf32, false, GemmKind::tf32, 80, "cublaslt:tf32:tensor_op",  ""},
  {Format::fp8,  false, GemmKind::e4m3, 89, "cublaslt:e4m3:tensor_op",  ""},
  {Format::mxfp4, true, GemmKind::f32,  75, "",                         ""},
  {Format::nvfp4, true, GemmKind::f32,  75, "",                         ""},
}};
// clang-format on

}  // namespace

const CudaFormatPlan* cuda_format_plan(Format format) {
  for (const auto& p : kPlans) {
    if (p.format == format) return &p;
  }
  return nullptr;
}

std::vector<BackendFormat> cuda_builtin_formats() {
  std::vector<BackendFormat> rows;
  for (const auto& p : kPlans) {
    BackendFormat row;
    row.format = p.format;
    const std::string sm = fmt::format("sm_{}+", p.min_compute);
    if (p.packed) {
      const std::vector<std::string> kinds = p.format == Format::nf4
                                                 ? std::vector<std::string>{"nf4", "nf4dq"}
                                                 : std::vector<std::string>{std::string(quant::name(p.format))};
      for (const std::string& kind : kinds) {
        row.kernels.push_back({sm, fmt::format("qjoule:cuda:{}_gemv_split+f16_cublaslt", kind),
                               "decode: 4-bit GEMV split along K; prefill: FP16 cuBLASLt"});
        if (p.format != Format::nvfp4)  // its 16-weight blocks: the split GEMV only
          row.kernels.push_back(
              {sm, fmt::format("qjoule:cuda:{}_gemv+f16_cublaslt", kind), "QJOULE_CUDA_GEMV4=plain: a block a row"});
      }
    } else {
      if (!p.gemv.empty())
        row.kernels.push_back(
            {sm, fmt::format("qjoule:cuda:{}_gemv,m>{}:{}", p.gemv, cuda_detail::kDenseGemvMaxRows, p.lt_path),
             "decode: qjoule's GEMV; prefill: cuBLASLt"});
      row.kernels.push_back({sm, std::string(p.lt_path), "cuBLASLt"});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace qjoule::kernels::detail

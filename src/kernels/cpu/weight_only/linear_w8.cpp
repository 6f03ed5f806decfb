// make_linear_w8: INT8 per-row weights dequantized in the kernel, FP32 compute.
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/weight_only_linear.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/quantize_int8.h"

namespace qjoule::kernels {

std::unique_ptr<Linear> make_linear_w8(const float* W, const float* bias, int64_t out, int64_t in,
                                       const std::string& tensor_name) {
  using Packed = quant::Int8Matrix;
  const WeightOnlyIsa isa = weight_only_isa();
  auto gemm = detail::gemm_for(isa, &detail::gemm_w8_f32_scalar, &detail::gemm_w8_f32_avx2, &detail::gemm_w8_avx512,
                               &detail::gemm_w8_avx512_bf16);
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      quant::quantize_matrix_int8(W, out, in, tensor_name), bias, std::string(quant::name(quant::Format::w8)),
      weight_only_kernel_path(isa, "w8_f32", true), gemm, nullptr, tensor_name);
}

}  // namespace qjoule::kernels

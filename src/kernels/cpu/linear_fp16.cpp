// make_linear_fp16_weights: FP16 weight storage, converted in the kernel, FP32 compute.
#include "kernels/cpu/weight_only_gemm.h"
#include "kernels/cpu/weight_only_linear.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/quantize_fp16.h"

namespace qjoule::kernels {

std::unique_ptr<Linear> make_linear_fp16_weights(const float* W, const float* bias, int64_t out, int64_t in,
                                                 const std::string& tensor_name) {
  using Packed = quant::Fp16Matrix;
  const WeightOnlyIsa isa = detail::at_most_avx2(weight_only_isa());  // fp16 has no AVX-512 kernel
  auto gemm = isa == WeightOnlyIsa::avx2 ? &detail::gemm_fp16_f32_avx2 : &detail::gemm_fp16_f32_scalar;
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      quant::quantize_matrix_fp16(W, out, in, tensor_name), bias, std::string(quant::name(quant::Format::fp16)),
      weight_only_kernel_path(isa, "f16w_f32"), gemm, nullptr, tensor_name);
}

}  // namespace qjoule::kernels

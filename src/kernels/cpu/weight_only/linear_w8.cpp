// make_linear_w8: INT8 per-row weights dequantized in the kernel, FP32 compute; at the avx2 and avx512 levels
// decode (m <= 4) on 16-bit integer activations where measured faster (gemv_w8_x16_avx2.cpp,
// gemv_w8_x16_avx512.cpp).
#include "kernels/cpu/weight_only/decode_gemv_choice.h"
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
  const auto gemm_x16 = isa == WeightOnlyIsa::avx2          ? &detail::gemm_w8_avx2_x16
                        : isa == WeightOnlyIsa::avx512_bf16 ? &detail::gemm_w8_avx512_bf16_x16
                                                            : &detail::gemm_w8_avx512_x16;
  const bool x16 = detail::choose_x16_decode(w8_x16_decode_available(isa), std::string(isa_name(isa)) + " w8", [&] {
    const auto w = detail::decode_timing_weights();
    const auto sample = quant::quantize_matrix_int8(w.data(), detail::kDecodeTimingRows, detail::kDecodeTimingCols,
                                                    "decode GEMV timing");
    return detail::x16_measured_faster(sample, gemm_x16, gemm);
  });
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      quant::quantize_matrix_int8(W, out, in, tensor_name), bias, std::string(quant::name(quant::Format::w8)),
      w8_kernel_path(isa, x16), x16 ? gemm_x16 : gemm, nullptr, tensor_name);
}

}  // namespace qjoule::kernels

// make_linear_nf4: bitsandbytes NF4 weights (optionally with double-quantized absmax), FP32 compute
// (BF16 panel compute for prefill on AVX-512 BF16 CPUs, 16-bit integer decode on AVX512_VNNI; labelled). On
// AVX512_VNNI plain nf4 is repacked at load into 16-row panels for the x16 kernel ("nf4_x16_repacked":
// nf4_repacked.h; the prefill on the rows' panels decoded from them where those run on AMX tiles), nf4:dq with
// its 8-bit absmax codes ("nf4dq_x16_repacked"), unless the rows are asked for (QJOULE_WEIGHT_ONLY_LAYOUT=rows,
// QJOULE_WEIGHT_ONLY_DECODE=float) or an absmax is NaN / Inf.
#include "kernels/cpu/weight_only/decode_gemv_choice.h"
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/weight_only_linear.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/quantize_nf4.h"

namespace qjoule::kernels {
namespace {

// A layer on the repacked weights: the x16 kernel at every m, or at m <= 4 with the prefill on the panels
// (repacked_prefill_on_panels).
template <class Packed>
std::unique_ptr<Linear> make_repacked_nf4(const Packed& packed, const float* bias, WeightOnlyIsa isa,
                                          const std::string& kernel, const std::string& tensor_name) {
  const bool panels = repacked_prefill_on_panels(isa);
  return std::make_unique<detail::WeightOnlyLinear<detail::RepackedNf4>>(
      detail::repack_nf4(packed), bias, std::string(quant::name(quant::Format::nf4)),
      repacked_x16_kernel_path(isa, kernel, true, true, panels),
      panels ? &detail::gemm_nf4_repacked_avx512_bf16_vnni : &detail::gemm_nf4_x16_repacked_avx512_vnni, nullptr,
      tensor_name);
}

}  // namespace

std::unique_ptr<Linear> make_linear_nf4_packed(quant::Nf4DqMatrix packed, const float* bias,
                                               const std::string& tensor_name) {
  const WeightOnlyIsa isa = weight_only_isa();
  if (repacked_x16_on(isa) && detail::nf4dq_repackable(packed)) {
    return make_repacked_nf4(packed, bias, isa, "nf4dq", tensor_name);
  }
  using Packed = quant::Nf4DqMatrix;
  auto gemm = detail::gemm_for(isa, &detail::gemm_nf4dq_f32_scalar, &detail::gemm_nf4dq_f32_avx2,
                               &detail::gemm_nf4dq_avx512, &detail::gemm_nf4dq_avx512_bf16);
  const auto gemm_x16 = isa == WeightOnlyIsa::avx2          ? &detail::gemm_nf4dq_avx2_x16
                        : isa == WeightOnlyIsa::avx512_bf16 ? &detail::gemm_nf4dq_avx512_bf16_vnni
                                                            : &detail::gemm_nf4dq_avx512_vnni;
  const bool x16 = detail::choose_x16_decode(isa, "nf4:dq", [&] {
    const auto w = detail::decode_timing_weights();
    const auto sample = quant::quantize_matrix_nf4_double(w.data(), detail::kDecodeTimingRows,
                                                          detail::kDecodeTimingCols, "decode GEMV timing");
    return detail::x16_measured_faster(sample, gemm_x16, gemm);
  });
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      std::move(packed), bias, std::string(quant::name(quant::Format::nf4)),
      four_bit_kernel_path(isa, "nf4dq_f32", x16), x16 ? gemm_x16 : gemm, nullptr, tensor_name);
}

std::unique_ptr<Linear> make_linear_nf4_packed(quant::Nf4Matrix packed, const float* bias,
                                               const std::string& tensor_name) {
  const WeightOnlyIsa isa = weight_only_isa();
  using Packed = quant::Nf4Matrix;
  if (repacked_x16_on(isa) && detail::nf4_absmax_finite(packed)) {
    return make_repacked_nf4(packed, bias, isa, "nf4", tensor_name);
  }
  auto gemm = detail::gemm_for(isa, &detail::gemm_nf4_f32_scalar, &detail::gemm_nf4_f32_avx2, &detail::gemm_nf4_avx512,
                               &detail::gemm_nf4_avx512_bf16);
  const auto gemm_x16 = isa == WeightOnlyIsa::avx2          ? &detail::gemm_nf4_avx2_x16
                        : isa == WeightOnlyIsa::avx512_bf16 ? &detail::gemm_nf4_avx512_bf16_vnni
                                                            : &detail::gemm_nf4_avx512_vnni;
  const bool x16 = detail::choose_x16_decode(isa, "nf4", [&] {
    const auto w = detail::decode_timing_weights();
    const auto sample = quant::quantize_matrix_nf4(w.data(), detail::kDecodeTimingRows, detail::kDecodeTimingCols,
                                                   "decode GEMV timing");
    return detail::x16_measured_faster(sample, gemm_x16, gemm);
  });
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      std::move(packed), bias, std::string(quant::name(quant::Format::nf4)), four_bit_kernel_path(isa, "nf4_f32", x16),
      x16 ? gemm_x16 : gemm, nullptr, tensor_name);
}

std::unique_ptr<Linear> make_linear_nf4(const float* W, const float* bias, int64_t out, int64_t in,
                                        const Nf4Options& options, const std::string& tensor_name) {
  if (options.double_quant)
    return make_linear_nf4_packed(quant::quantize_matrix_nf4_double(W, out, in, tensor_name), bias, tensor_name);
  return make_linear_nf4_packed(quant::quantize_matrix_nf4(W, out, in, tensor_name), bias, tensor_name);
}

}  // namespace qjoule::kernels

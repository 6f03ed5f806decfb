// make_linear_fp16_weights: FP16 weight storage, converted in the kernel, FP32 compute (AVX2 kernels; prefill
// on FP32 panels, oneDNN's FP32 matmul, on AVX-512 CPUs).
#include "kernels/cpu/weight_only/panel_matmul.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/weight_only_linear.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/quantize_fp16.h"

namespace qjoule::kernels {

namespace {

// The AVX2 kernel for decode-sized products; prefill on FP32 panels of FP16 rows converted in place
// (avx512::f32_panel_gemm: oneDNN's FP32 matmul, the same FP32 arithmetic on the same weights).
void gemm_fp16_f32_panel(const quant::Fp16Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m <= avx512::kGemvMaxRowsForPanels) return detail::gemm_fp16_f32_avx2(w, bias, x, m, y);
  avx512::f32_panel_gemm(x, m, w.rows, w.cols, bias, y, [&w](int64_t o_begin, int64_t o_end, float* panel) {
    const uint16_t* bits = w.bits.data() + o_begin * w.cols;
    const int64_t n = (o_end - o_begin) * w.cols;
    for (int64_t i = 0; i < n; ++i) panel[i] = quant::fp16_bits_to_fp32(bits[i]);
  });
}

}  // namespace

std::unique_ptr<Linear> make_linear_fp16_weights(const float* W, const float* bias, int64_t out, int64_t in,
                                                 const std::string& tensor_name) {
  using Packed = quant::Fp16Matrix;
  const WeightOnlyIsa widest = weight_only_isa();
  const WeightOnlyIsa isa = detail::at_most_avx2(widest);  // fp16 has no AVX-512 GEMV
  // On AVX-512 CPUs prefill-sized products go through FP32 panels on oneDNN's FP32 matmul (FP32 arithmetic,
  // as the AVX2 kernel's): "qjoule:avx2:f16w_f32,m>4:f32_panel+onednn:brg:avx512_core:f32".
  if (widest >= WeightOnlyIsa::avx512)
    return std::make_unique<detail::WeightOnlyLinear<Packed>>(
        quant::quantize_matrix_fp16(W, out, in, tensor_name), bias, std::string(quant::name(quant::Format::fp16)),
        weight_only_kernel_path(isa, "f16w_f32") + ",m>4:" + avx512::f32_panel_kernel_path(), &gemm_fp16_f32_panel,
        nullptr, tensor_name);
  auto gemm = isa == WeightOnlyIsa::avx2 ? &detail::gemm_fp16_f32_avx2 : &detail::gemm_fp16_f32_scalar;
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      quant::quantize_matrix_fp16(W, out, in, tensor_name), bias, std::string(quant::name(quant::Format::fp16)),
      weight_only_kernel_path(isa, "f16w_f32"), gemm, nullptr, tensor_name);
}

}  // namespace qjoule::kernels

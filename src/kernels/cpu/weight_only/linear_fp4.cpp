// make_linear_mxfp4 / make_linear_nvfp4: E2M1 weights with block scales (formats.h), FP32 activations. On
// AVX512_VNNI the weights repacked at load into 16-row panels for the x16 kernel ("mxfp4_x16_repacked" /
// "nvfp4_x16_repacked": fp4_repacked.h; the avx512_bf16 level's prefill on the rows' panels decoded from
// them on AMX tiles), unless the rows are asked for
// (QJOULE_WEIGHT_ONLY_LAYOUT=rows, QJOULE_WEIGHT_ONLY_DECODE=float); otherwise the kernels nf4 has (FP32 /
// BF16 GEMVs and panels, the row-wise x16 decode GEMV where measured faster, AVX2, the scalar twin), labelled
// "mxfp4_f32" / "nvfp4_f32" and their x16 / bf16 forms.
#include <cmath>
#include <type_traits>

#include "kernels/cpu/weight_only/decode_gemv_choice.h"
#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/weight_only_linear.h"
#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/quantize_fp4.h"

namespace qjoule::kernels {
namespace {

template <class Packed>
constexpr quant::Format kFormat =
    std::is_same_v<Packed, quant::Mxfp4Matrix> ? quant::Format::mxfp4 : quant::Format::nvfp4;

template <class Packed>
Packed quantize_fp4(const float* W, int64_t out, int64_t in, const std::string& tensor_name) {
  if constexpr (std::is_same_v<Packed, quant::Mxfp4Matrix>) {
    return quant::quantize_matrix_mxfp4(W, out, in, tensor_name);
  } else {
    return quant::quantize_matrix_nvfp4(W, out, in, tensor_name);
  }
}

// A packed matrix from elsewhere (a checkpoint's codes): every block scale a finite, non-negative value, as
// the quantizers write them (the kernels read E4M3's bits as a magnitude).
template <class Packed>
void require_finite_scales(const Packed& w, const std::string& tensor_name) {
  for (int64_t r = 0; r < w.rows; ++r) {
    for (int64_t j = 0; j < w.blocks_per_row(); ++j) {
      const auto& b = w.row(r)[j];
      if constexpr (std::is_same_v<Packed, quant::Mxfp4Matrix>) {
        if (b.scale_e8m0 == 0xFF)
          fail("tensor '{}': NaN block scale (E8M0 0xFF) at [{}, {}]; expected a power of two", tensor_name, r, j);
      } else if ((b.scale_e4m3 & 0x7F) == 0x7F || (b.scale_e4m3 & 0x80) != 0) {
        fail("tensor '{}': block scale E4M3 0x{:02X} ({}) at [{}, {}]; expected a finite scale >= 0", tensor_name,
             b.scale_e4m3, quant::e4m3_value(b.scale_e4m3), r, j);
      }
    }
  }
  if constexpr (std::is_same_v<Packed, quant::Nvfp4Matrix>) {
    if (!std::isfinite(w.tensor_scale) || !(w.tensor_scale > 0.0f))
      fail("tensor '{}': tensor scale {}; expected a finite scale > 0", tensor_name, w.tensor_scale);
  }
}

template <class Packed>
std::unique_ptr<Linear> make_fp4_from(Packed packed, const float* bias, const std::string& tensor_name) {
  const WeightOnlyIsa isa = weight_only_isa();
  const std::string name(quant::name(kFormat<Packed>));
  if (repacked_x16_on(isa)) {
    const bool panels = repacked_prefill_on_panels(isa);
    return std::make_unique<detail::WeightOnlyLinear<detail::RepackedFp4<Packed>>>(
        detail::repack_fp4(packed), bias, name, repacked_x16_kernel_path(isa, name, true, true, panels),
        panels ? &detail::gemm_fp4_repacked_avx512_bf16_vnni<Packed>
               : &detail::gemm_fp4_x16_repacked_avx512_vnni<Packed>,
        nullptr, tensor_name);
  }
  auto gemm = detail::gemm_for(isa, &detail::gemm_fp4_f32_scalar<Packed>, &detail::gemm_fp4_f32_avx2<Packed>,
                               &detail::gemm_fp4_avx512<Packed>, &detail::gemm_fp4_avx512_bf16<Packed>);
  const auto gemm_x16 = isa == WeightOnlyIsa::avx2          ? &detail::gemm_fp4_avx2_x16<Packed>
                        : isa == WeightOnlyIsa::avx512_bf16 ? &detail::gemm_fp4_avx512_bf16_vnni<Packed>
                                                            : &detail::gemm_fp4_avx512_vnni<Packed>;
  const bool x16 = detail::choose_x16_decode(isa, name, [&] {
    const auto w = detail::decode_timing_weights();
    const auto sample =
        quantize_fp4<Packed>(w.data(), detail::kDecodeTimingRows, detail::kDecodeTimingCols, "decode GEMV timing");
    return detail::x16_measured_faster(sample, gemm_x16, gemm);
  });
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(std::move(packed), bias, name,
                                                            repacked_x16_kernel_path(isa, name, x16, false),
                                                            x16 ? gemm_x16 : gemm, nullptr, tensor_name);
}

}  // namespace

std::unique_ptr<Linear> make_linear_mxfp4(const float* W, const float* bias, int64_t out, int64_t in,
                                          const std::string& tensor_name) {
  return make_fp4_from(quantize_fp4<quant::Mxfp4Matrix>(W, out, in, tensor_name), bias, tensor_name);
}

std::unique_ptr<Linear> make_linear_nvfp4(const float* W, const float* bias, int64_t out, int64_t in,
                                          const std::string& tensor_name) {
  return make_fp4_from(quantize_fp4<quant::Nvfp4Matrix>(W, out, in, tensor_name), bias, tensor_name);
}

std::unique_ptr<Linear> make_linear_mxfp4_packed(quant::Mxfp4Matrix packed, const float* bias,
                                                 const std::string& tensor_name) {
  require_finite_scales(packed, tensor_name);
  return make_fp4_from(std::move(packed), bias, tensor_name);
}

std::unique_ptr<Linear> make_linear_nvfp4_packed(quant::Nvfp4Matrix packed, const float* bias,
                                                 const std::string& tensor_name) {
  require_finite_scales(packed, tensor_name);
  return make_fp4_from(std::move(packed), bias, tensor_name);
}

}  // namespace qjoule::kernels

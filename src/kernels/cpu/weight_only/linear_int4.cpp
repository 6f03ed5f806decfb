// make_linear_int4: INT4 group-wise weights (sym or asym, G = 32/64/128) with FP32 activations
// ("int4_f32"; on AVX512_VNNI "int4_x16_repacked": 16-bit integer activations on weights repacked at load; at the
// avx2 level "int4_x16" decode on the rows as stored, where measured faster)
// or INT8 activation blocks and integer dot products ("int4_s8": AVX512_VNNI where the CPU has it and the
// ISA limit allows AVX-512, on weights repacked at load; AVX2 otherwise).
#include <type_traits>

#include <fmt/format.h>

#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"
#include "kernels/cpu/weight_only/decode_gemv_choice.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/weight_only_linear.h"
#include "qjoule/quant/format.h"
#include "qjoule/error.h"
#include "qjoule/quant/quantize_int4.h"

namespace qjoule::kernels {
namespace {

template <class Block>
constexpr bool kAsym = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;

template <class Block>
std::unique_ptr<Linear> make_int4_from(quant::BlockMatrix<Block> packed, const float* bias, const Int4Options& options,
                                       const std::string& tensor_name) {
  using Packed = quant::BlockMatrix<Block>;
  const WeightOnlyIsa isa = weight_only_isa();
  if (options.int8_activations) {
    if (isa >= WeightOnlyIsa::avx512 && cpu_supports_avx512_vnni()) {
      if (weight_only_repacking_on() && detail::int4_scales_finite(packed)) {
        return std::make_unique<detail::WeightOnlyLinear<detail::RepackedInt4<Block>>>(
            detail::repack_int4(packed), bias, std::string(quant::name(quant::Format::int4)),
            int4_s8_kernel_path(isa, true), nullptr, &detail::gemm_int4_s8_repacked_avx512_vnni<Block>, tensor_name);
      }
      return std::make_unique<detail::WeightOnlyLinear<Packed>>(
          std::move(packed), bias, std::string(quant::name(quant::Format::int4)), int4_s8_kernel_path(isa, false),
          nullptr, &detail::gemm_int4_s8_avx512_vnni<Block>, tensor_name);
    }
    const WeightOnlyIsa s8_isa = detail::at_most_avx2(isa);
    const auto gemm_s8 = int4_s8_avx_vnni_on(s8_isa)     ? &detail::gemm_int4_s8_avx_vnni<Block>
                         : s8_isa == WeightOnlyIsa::avx2 ? &detail::gemm_int4_s8_avx2<Block>
                                                         : &detail::gemm_int4_s8_scalar<Block>;
    return std::make_unique<detail::WeightOnlyLinear<Packed>>(
        std::move(packed), bias, std::string(quant::name(quant::Format::int4)), int4_s8_kernel_path(s8_isa), nullptr,
        gemm_s8, tensor_name);
  }
  // On AVX512_VNNI the weights repacked for the x16 kernel (decode, and prefill unless the rows' panels decoded
  // from them run on AMX tiles: repacked_prefill_on_panels), unless the rows are asked for
  // (QJOULE_WEIGHT_ONLY_LAYOUT=rows, QJOULE_WEIGHT_ONLY_DECODE=float) or a scale is NaN / Inf.
  if (repacked_x16_on(isa) && detail::int4_scales_finite(packed)) {
    const bool panels = repacked_prefill_on_panels(isa);
    return std::make_unique<detail::WeightOnlyLinear<detail::RepackedInt4<Block>>>(
        detail::repack_int4(packed), bias, std::string(quant::name(quant::Format::int4)),
        int4_kernel_path(isa, true, true, panels),
        panels ? &detail::gemm_int4_repacked_avx512_bf16_vnni<Block>
               : &detail::gemm_int4_x16_repacked_avx512_vnni<Block>,
        nullptr, tensor_name);
  }
  auto gemm = detail::gemm_for(isa, &detail::gemm_int4_f32_scalar<Block>, &detail::gemm_int4_f32_avx2<Block>,
                               &detail::gemm_int4_avx512<Block>, &detail::gemm_int4_avx512_bf16<Block>);
  const auto gemm_x16 = isa == WeightOnlyIsa::avx2          ? &detail::gemm_int4_avx2_x16<Block>
                        : isa == WeightOnlyIsa::avx512_bf16 ? &detail::gemm_int4_avx512_bf16_vnni<Block>
                                                            : &detail::gemm_int4_avx512_vnni<Block>;
  const std::string layout = fmt::format("int4:g={}:{}", Block::kSize, kAsym<Block> ? "asym" : "sym");
  const bool x16 = detail::choose_x16_decode(isa, layout, [&] {
    const auto w = detail::decode_timing_weights();
    const auto sample = quant::quantize_matrix_int4<Block>(w.data(), detail::kDecodeTimingRows,
                                                           detail::kDecodeTimingCols, "decode GEMV timing");
    return detail::x16_measured_faster(sample, gemm_x16, gemm);
  });
  return std::make_unique<detail::WeightOnlyLinear<Packed>>(
      std::move(packed), bias, std::string(quant::name(quant::Format::int4)), int4_kernel_path(isa, x16, false),
      x16 ? gemm_x16 : gemm, nullptr, tensor_name);
}

template <class Block>
std::unique_ptr<Linear> make_int4(const float* W, const float* bias, int64_t out, int64_t in,
                                  const Int4Options& options, const std::string& tensor_name) {
  return make_int4_from<Block>(quant::quantize_matrix_int4<Block>(W, out, in, tensor_name), bias, options, tensor_name);
}

template <int G>
std::unique_ptr<Linear> make_int4_group(const float* W, const float* bias, int64_t out, int64_t in,
                                        const Int4Options& options, const std::string& tensor_name) {
  if (options.asymmetric) return make_int4<quant::BlockInt4Asym<G>>(W, bias, out, in, options, tensor_name);
  return make_int4<quant::BlockInt4Sym<G>>(W, bias, out, in, options, tensor_name);
}

}  // namespace

std::unique_ptr<Linear> make_linear_int4(const float* W, const float* bias, int64_t out, int64_t in,
                                         const Int4Options& options, const std::string& tensor_name) {
  switch (options.group_size) {
    case 32: return make_int4_group<32>(W, bias, out, in, options, tensor_name);
    case 64: return make_int4_group<64>(W, bias, out, in, options, tensor_name);
    case 128: return make_int4_group<128>(W, bias, out, in, options, tensor_name);
    default: fail("tensor '{}': int4 group size {}; expected 32, 64 or 128", tensor_name, options.group_size);
  }
}

template <class Block>
std::unique_ptr<Linear> make_linear_int4_packed(quant::BlockMatrix<Block> packed, const float* bias,
                                                const std::string& tensor_name, bool int8_activations) {
  constexpr bool asymmetric = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  return make_int4_from<Block>(std::move(packed), bias, Int4Options{Block::kSize, asymmetric, int8_activations},
                               tensor_name);
}

#define QJOULE_INT4_PACKED(G)                                                                                         \
  template std::unique_ptr<Linear> make_linear_int4_packed(quant::BlockMatrix<quant::BlockInt4Sym<G>>, const float*,  \
                                                           const std::string&, bool);                                 \
  template std::unique_ptr<Linear> make_linear_int4_packed(quant::BlockMatrix<quant::BlockInt4Asym<G>>, const float*, \
                                                           const std::string&, bool);
QJOULE_INT4_PACKED(32)
QJOULE_INT4_PACKED(64)
QJOULE_INT4_PACKED(128)
#undef QJOULE_INT4_PACKED

}  // namespace qjoule::kernels

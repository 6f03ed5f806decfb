// The 16 rows' absmax of a 64-block of a repacked NF4 panel (repacked/nf4_repacked.h), as formats.h decodes it:
// plain nf4's FP32 values, or nf4:dq's map[code] · group scale + mean (a product, then a sum). Shared by the x16
// kernel (gemm_nf4_x16_repacked_avx512_vnni.cpp) and the prefill panels' decoder (gemm_repacked_avx512_bf16.cpp);
// its target is a subset of both callers', so it inlines into either.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"

#define QJOULE_TARGET_NF4_PANEL_ABSMAX __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace qjoule::kernels::detail {

// The 16 rows' absmax of 64-block g of a panel, made once a call. nf4:dq: the flattened block index row · nb64
// + g (first_blocks(p): the rows' row · nb64) picks the group scale. Where a row holds at most 256 blocks, the
// panel's 16 rows span at most 16 groups from lane 0's, so one permute of the 16 scales from there picks each
// lane's (the load masked at the array's end); wider rows gather them. The padding rows' lanes get some group's
// (finite) scale or 0: their outputs are not stored.
struct PanelAbsmax {
  static_assert(quant::kNf4DoubleQuantGroup == 256, "the group index is the block index shifted by 8");
  const RepackedNf4& w;
  const float* map = quant::dynamic_map_signed().data();
  const float* scales = w.absmax_scales.data();
  const int64_t scale_count = static_cast<int64_t>(w.absmax_scales.size());
  const bool window = w.blocks64() <= 256;  // the scales by one permute, not a gather

  QJOULE_TARGET_NF4_PANEL_ABSMAX __m512i first_blocks(int64_t p) const {
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(p * kRepackedRows)), lanes),
                              _mm512_set1_epi32(static_cast<int>(w.blocks64())));
  }

  template <bool kDq>
  QJOULE_TARGET_NF4_PANEL_ABSMAX __m512 at(const uint8_t* panel, __m512i first_block, int64_t g) const {
    if constexpr (!kDq) {
      return _mm512_loadu_ps(w.absmax(panel, g));
    } else {
      const __m512i codes =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.absmax_codes(panel, g))));
      const __m512 value = _mm512_i32gather_ps(codes, map, 4);
      const __m512i group = _mm512_srli_epi32(_mm512_add_epi32(first_block, _mm512_set1_epi32(static_cast<int>(g))), 8);
      __m512 scale;
      if (window) {
        const int64_t first = _mm_cvtsi128_si32(_mm512_castsi512_si128(group));  // lane 0's group
        const int64_t left = scale_count - first;
        const __m512 from_first =
            _mm512_maskz_loadu_ps(static_cast<__mmask16>(left >= 16 ? 0xFFFF : (1u << left) - 1), scales + first);
        scale = _mm512_permutexvar_ps(_mm512_sub_epi32(group, _mm512_set1_epi32(static_cast<int>(first))), from_first);
      } else {
        const __mmask16 in_range = _mm512_cmplt_epi32_mask(
            group, _mm512_set1_epi32(static_cast<int>(scale_count)));  // not the padding rows past it
        scale = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in_range, group, scales, 4);
      }
      // GCC contracts _mm512_mul_ps then _mm512_add_ps into one FMA where the caller's target has FMA (the
      // prefill panels' decoder); the empty asm keeps the product rounded on its own, as formats.h has it.
      __m512 product = _mm512_mul_ps(value, scale);
      __asm__("" : "+v"(product));
      return _mm512_add_ps(product, _mm512_set1_ps(w.absmax_mean));
    }
  }
};

}  // namespace qjoule::kernels::detail

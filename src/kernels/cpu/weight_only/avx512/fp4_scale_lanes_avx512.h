// The FP4 formats' block scale bytes as FP32, one byte a dword lane, decoded exactly in vector registers (the
// values of fp4_scales.h's tables: e8m0_values, e4m3_values), for the AVX-512 kernels on rows
// (gemm_fp4_avx512.cpp) and on repacked panels (gemm_fp4_x16_repacked_avx512_vnni.cpp). NaN bytes (E8M0
// 0xFF, E4M3 0x7F) and negative E4M3 scales never reach a kernel (make_linear_*_packed refuses them).
#pragma once

#include <immintrin.h>

#define QJOULE_TARGET_FP4_SCALE_LANES __attribute__((target("avx512f,avx512bw")))

namespace qjoule::kernels::detail {

// E8M0: 2^(e − 127) is the FP32 bit pattern e << 23 for e >= 1 and 0x00400000 for e = 0 (2^-127, subnormal).
QJOULE_TARGET_FP4_SCALE_LANES inline __m512 e8m0_lanes(__m512i e) {
  const __m512i bits = _mm512_mask_mov_epi32(
      _mm512_slli_epi32(e, 23), _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()), _mm512_set1_epi32(0x00400000));
  return _mm512_castsi512_ps(bits);
}

// E4M3 (e = bits 6..3, m = bits 2..0), exactly and with no FP32 subnormal (whatever the MXCSR's DAZ): byte
// << 20 puts e and m in FP32's exponent and mantissa fields, and + 120 << 23 rebiases (7 → 127), which is
// (1 + m/8)·2^(e − 7), the value for e >= 1. For e = 0 that gives (1 + m/8)·2^-7, and 2·that − 2^-6 = m·2^-9,
// the subnormal's value, exact in one FMA.
QJOULE_TARGET_FP4_SCALE_LANES inline __m512 e4m3_lanes(__m512i bits) {
  const __m512 normal =
      _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(bits, 20), _mm512_set1_epi32(120 << 23)));
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(bits, _mm512_set1_epi32(8));
  return _mm512_mask_fmsub_ps(normal, subnormal, _mm512_set1_ps(2.0f), _mm512_set1_ps(0x1p-6f));
}

// E4M3 bytes (16, finite, non-negative) divided by 256, exactly, in three instructions: byte << 7 in a 16-bit
// word puts e in the low four bits of FP16's exponent and m atop its mantissa, so the FP16 value is
// (1 + m/8)·2^(e − 15) for e >= 1 and m·2^-17 for e = 0 (an FP16 subnormal, which vcvtph2ps converts
// exactly, whatever the MXCSR's DAZ): the E4M3 value times 2^-8 either way. The caller folds the 256 into
// another factor.
QJOULE_TARGET_FP4_SCALE_LANES inline __m512 e4m3_lanes_over_256(__m128i bytes) {
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(bytes), 7));
}

}  // namespace qjoule::kernels::detail

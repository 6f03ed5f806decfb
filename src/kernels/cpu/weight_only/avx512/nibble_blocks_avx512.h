// Loading a 128-weight chunk of a 4-bit block format's row (weight_only_avx512.h: 64 bytes of nibbles as
// 16 dword lanes, lane l = weights 8l .. 8l + 7) from the 128 / G consecutive blocks that hold it, and
// spreading one value per block over the lanes of its weights. Shared by the int4, nf4 and FP4 decoders
// (gemm_weight_only_avx512.cpp, gemm_fp4_avx512.cpp); a block needs a member `qs` of G / 2 bytes.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/weight_only/avx512/weight_only_gemv_avx512.h"

namespace qjoule::kernels::detail {

// The 64 bytes of nibbles of `count` consecutive blocks (count = 128 / block size) as one vector.
template <class Block>
QJOULE_TARGET_AVX512 inline __m512i gather_codes(const Block* b) {
  constexpr int G = Block::kSize;
  if constexpr (G == 128) {
    return _mm512_loadu_si512(b[0].qs);
  } else if constexpr (G == 64) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[0].qs))),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[1].qs)), 1);
  } else if constexpr (G == 32) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[2].qs)), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[3].qs)), 3);
  } else {
    static_assert(G == 16);
    long long q[8];  // 8 bytes of nibbles a block
    for (int j = 0; j < 8; ++j) __builtin_memcpy(&q[j], b[j].qs, 8);
    return _mm512_loadu_si512(q);
  }
}

// Per-lane values from one value per block: lanes 16/count·j .. belong to block j.
template <int Count>
QJOULE_TARGET_AVX512 inline __m512 per_block_lanes(const float (&v)[Count]) {
  if constexpr (Count == 1) {
    return _mm512_set1_ps(v[0]);
  } else if constexpr (Count == 2) {
    return _mm512_insertf32x8(_mm512_set1_ps(v[0]), _mm256_set1_ps(v[1]), 1);
  } else if constexpr (Count == 4) {
    const __m512 four = _mm512_castps128_ps512(_mm_setr_ps(v[0], v[1], v[2], v[3]));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), four);
  } else {
    static_assert(Count == 8);
    const __m512 eight = _mm512_castps256_ps512(_mm256_loadu_ps(v));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), eight);
  }
}

}  // namespace qjoule::kernels::detail

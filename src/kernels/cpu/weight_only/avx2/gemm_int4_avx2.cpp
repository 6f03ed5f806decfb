// int4 weights, FP32 activations. decode64 (the bulk): 64 nibbles = 32 bytes seen as 8 dword lanes;
// for s = 0..7, (lanes >> 4s) & 0xF are 8 codes u (permuted order: weight_only_avx2.h), then
// (u − z) in integers, converted and scaled by the group's FP16 scale — shifts, no byte shuffles.
// For G = 32 the two groups of a 64-chunk fill one half of the lanes each. FP32 FMA compute.
#include <type_traits>

#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

template <class Block>
int zero_point(const Block& b) {
  if constexpr (std::is_same_v<Block, quant::BlockInt4Sym<Block::kSize>>) {
    return quant::kInt4SymZero;
  } else {
    return b.zero;
  }
}

// out[s] = (((lanes >> 4s) & 0xF) − z) · d for s = 0..7.
QJOULE_TARGET_AVX2 inline void int4_decode_lanes(__m256i lanes, __m256i z, __m256 d, __m256 out[8]) {
  const __m256i mask = _mm256_set1_epi32(0x0F);
  for (int s = 0; s < 8; ++s) {
    const __m256i shifted = _mm256_srli_epi32(lanes, 4 * s);
    const __m256i u = s == 7 ? shifted : _mm256_and_si256(shifted, mask);  // the top nibble needs no mask
    out[s] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(u, z)), d);
  }
}

template <class Block>
struct Int4Decoder {
  static constexpr int G = Block::kSize;
  static constexpr bool kPermuted = true;
  const quant::BlockMatrix<Block>& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  struct Row {
    const Block* blocks;
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      if constexpr (G == 32) {
        const Block& b0 = blocks[k / G];
        const Block& b1 = blocks[k / G + 1];
        const __m256i lanes = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1.qs)),
                                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0.qs)));
        const __m256i z = _mm256_set_m128i(_mm_set1_epi32(zero_point(b1)), _mm_set1_epi32(zero_point(b0)));
        const __m256 d = _mm256_set_m128(_mm_set1_ps(_cvtsh_ss(b1.d)), _mm_set1_ps(_cvtsh_ss(b0.d)));
        int4_decode_lanes(lanes, z, d, out);
      } else {
        const Block& b = blocks[k / G];
        const __m256i lanes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + (k % G) / 2));
        int4_decode_lanes(lanes, _mm256_set1_epi32(zero_point(b)), _mm256_set1_ps(_cvtsh_ss(b.d)), out);
      }
    }
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {  // natural order (G = 32 tail)
      const Block& b = blocks[k / G];
      __m128i lo, hi;
      avx2::unpack_nibbles32(b.qs + (k % G) / 2, lo, hi);
      const __m128i z = _mm_set1_epi8(static_cast<char>(zero_point(b)));
      lo = _mm_sub_epi8(lo, z);
      hi = _mm_sub_epi8(hi, z);
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(b.d));
      out[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), d);
      out[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), d);
      out[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), d);
      out[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), d);
    }
    QJOULE_TARGET_AVX2 float at(int64_t k) const {  // unused: padded_cols() is a multiple of G
      const Block& b = blocks[k / G];
      const int i = static_cast<int>(k % G);
      const int u = (i % 2 == 0) ? (b.qs[i / 2] >> 4) : (b.qs[i / 2] & 0x0F);
      return static_cast<float>(u - zero_point(b)) * _cvtsh_ss(b.d);
    }
  };
  Row row(int64_t o) const { return Row{w.row(o)}; }
};

}  // namespace

template <class Block>
void gemm_int4_f32_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(Int4Decoder<Block>{w}, bias, x, m, y);
}

template void gemm_int4_f32_avx2<quant::BlockInt4Sym<32>>(const quant::BlockMatrix<quant::BlockInt4Sym<32>>&,
                                                          const float*, const float*, int64_t, float*);
template void gemm_int4_f32_avx2<quant::BlockInt4Sym<64>>(const quant::BlockMatrix<quant::BlockInt4Sym<64>>&,
                                                          const float*, const float*, int64_t, float*);
template void gemm_int4_f32_avx2<quant::BlockInt4Sym<128>>(const quant::BlockMatrix<quant::BlockInt4Sym<128>>&,
                                                           const float*, const float*, int64_t, float*);
template void gemm_int4_f32_avx2<quant::BlockInt4Asym<32>>(const quant::BlockMatrix<quant::BlockInt4Asym<32>>&,
                                                           const float*, const float*, int64_t, float*);
template void gemm_int4_f32_avx2<quant::BlockInt4Asym<64>>(const quant::BlockMatrix<quant::BlockInt4Asym<64>>&,
                                                           const float*, const float*, int64_t, float*);
template void gemm_int4_f32_avx2<quant::BlockInt4Asym<128>>(const quant::BlockMatrix<quant::BlockInt4Asym<128>>&,
                                                            const float*, const float*, int64_t, float*);

}  // namespace qjoule::kernels::detail

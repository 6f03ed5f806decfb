// mxfp4 / nvfp4 weights, FP32 compute (the AVX2 driver, weight_only_avx2.h). decode64: 64 codes from 2
// MXFP4 blocks (16 bytes each) or 4 NVFP4 blocks (8 bytes each) seen as 8 dword lanes; for s = 0..7 the
// lanes shifted right by 4s index the 8 magnitudes of E2M1 with vpermps (which reads the low 3 bits), the
// code's bit 3 moved to the sign bit gives the sign (E2M1's codes 8..15 are the negatives of 0..7, code 8
// being −0, as kE2M1Table), and each lane is multiplied by its block's scale (fp4_scales.h): 8 weights per
// vpermps, one AND, one XOR and one multiply, permuted order.
#include <cstring>

#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

template <class Packed>
struct Fp4Decoder {
  using Block = std::remove_cv_t<std::remove_reference_t<decltype(*std::declval<Packed>().blocks.data())>>;
  static constexpr int G = Block::kSize;
  static constexpr bool kPermuted = true;
  const Packed& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  struct Row : Fp4RowCursor<Block> {
    using Fp4RowCursor<Block>::blocks;
    using Fp4RowCursor<Block>::tensor_scale;
    using Fp4RowCursor<Block>::scale_of;
    using Fp4RowCursor<Block>::at;
    // The 32 bytes of nibbles of weights k .. k + 64 as 8 dword lanes, and each lane's block scale.
    QJOULE_TARGET_AVX2 void lanes64(int64_t k, __m256i& codes, __m256& scale) const {
      const Block* b = blocks + k / G;
      if constexpr (G == 32) {
        codes =
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs))),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
        scale = _mm256_setr_m128(_mm_set1_ps(scale_of(b[0])), _mm_set1_ps(scale_of(b[1])));
      } else {
        static_assert(G == 16);
        long long q[4];
        float s[4];
        for (int j = 0; j < 4; ++j) {
          std::memcpy(&q[j], b[j].qs, 8);
          s[j] = scale_of(b[j]);
        }
        codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        scale = _mm256_setr_ps(s[0], s[0], s[1], s[1], s[2], s[2], s[3], s[3]);
      }
    }
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      __m256i lanes;
      __m256 scale;
      lanes64(k, lanes, scale);
      const __m256 magnitudes = _mm256_loadu_ps(quant::kE2M1Table.data());  // codes 0..7
      const __m256i sign_bit = _mm256_set1_epi32(static_cast<int>(0x80000000u));
      for (int s = 0; s < 8; ++s) {
        const __m256i idx = _mm256_srli_epi32(lanes, 4 * s);                                    // code in bits 0..3
        const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(lanes, 28 - 4 * s), sign_bit);  // its bit 3
        const __m256 v = _mm256_xor_ps(_mm256_permutevar8x32_ps(magnitudes, idx), _mm256_castsi256_ps(sign));
        out[s] = _mm256_mul_ps(v, scale);
      }
    }
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {  // natural order: a cols % 64 tail
      alignas(32) float v[32];
      for (int i = 0; i < 32; ++i) v[i] = at(k + i);
      for (int j = 0; j < 4; ++j) out[j] = _mm256_load_ps(v + 8 * j);
    }
  };
  Row row(int64_t o) const { return Row{fp4_row_cursor(w, o)}; }
};

}  // namespace

template <class Packed>
void gemm_fp4_f32_avx2(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(Fp4Decoder<Packed>{w}, bias, x, m, y);
}

template void gemm_fp4_f32_avx2<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template void gemm_fp4_f32_avx2<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);

}  // namespace qjoule::kernels::detail

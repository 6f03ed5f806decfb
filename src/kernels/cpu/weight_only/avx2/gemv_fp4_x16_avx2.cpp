// mxfp4 / nvfp4 weight-only decode on AVX2 with 16-bit integer activations ("qjoule:avx2:mxfp4_x16",
// "qjoule:avx2:nvfp4_x16", gemv_x16_avx2.h): E2M1 as 16-bit integers T16 = 2 · T (its values are multiples of 0.5:
// exact, |T16| <= 12), looked up by two vpshufb a 32-block; the block's scale (fp4_scales.h) over 2 scales the exact
// int32 sums. An MXFP4 block is one 32-block; two NVFP4 blocks of 16 make one, each half with its scale. An NVFP4
// row whose width is 16 past a multiple of 32 ends in FP32.
#include <cstring>

#include "kernels/cpu/weight_only/avx2/gemv_x16_avx2.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

constexpr float kE2M1TableScale = 2.0f;

QJOULE_TARGET_AVX2 avx2::WordTable e2m1_word_table() {
  int16_t words[16];
  for (int c = 0; c < 16; ++c) words[c] = static_cast<int16_t>(quant::kE2M1Table[c] * kE2M1TableScale);
  return avx2::word_table(words);
}

template <class Packed>
struct Fp4X16Decoder {
  using Block = std::remove_cv_t<std::remove_reference_t<decltype(*std::declval<Packed>().blocks.data())>>;
  static constexpr int G = Block::kSize;
  static constexpr bool kHalfScales = G == 16, kWholeBlockSums = G == 32, kZeroPoints = false;  // |2·E2M1| <= 12
  const Packed& w;
  avx2::WordTable table;
  int64_t rows() const { return w.rows; }
  int64_t blocks32() const { return w.padded_cols() / 32; }
  int64_t tail() const { return w.padded_cols() % 32; }
  static int element(int j) { return avx2::table_element(j); }
  struct Row {
    Fp4RowCursor<Block> cursor;
    const avx2::WordTable& table;
    int64_t tail_start;  // 32 · blocks32()
    QJOULE_TARGET_AVX2 void block(int64_t b, __m256i& lo, __m256i& hi) const {
      __m128i bytes;
      if constexpr (G == 32) {
        bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cursor.blocks[b].qs));
      } else {
        long long q[2];
        std::memcpy(&q[0], cursor.blocks[2 * b].qs, 8);
        std::memcpy(&q[1], cursor.blocks[2 * b + 1].qs, 8);
        bytes = _mm_set_epi64x(q[1], q[0]);
      }
      avx2::table_words(bytes, table, lo, hi);
    }
    QJOULE_TARGET_AVX2 void codes(int64_t b, __m256i& lo, __m256i& hi) const { block(b, lo, hi); }
    // What an integer word of the format's block i (of G weights) is worth.
    float block_scale(int64_t i) const { return cursor.scale_of(cursor.blocks[i]) * (1.0f / kE2M1TableScale); }
    float scale(int64_t b) const {  // MXFP4: 32-block b is block b
      static_assert(G == 32, "NVFP4's 32-blocks have two scales: half_scales");
      return block_scale(b);
    }
    QJOULE_TARGET_AVX2 __m256 scales8(int64_t b) const {
      return _mm256_setr_ps(scale(b), scale(b + 1), scale(b + 2), scale(b + 3), scale(b + 4), scale(b + 5),
                            scale(b + 6), scale(b + 7));
    }
    void half_scales(int64_t b, float& lo, float& hi) const {  // NVFP4: 32-block b is blocks 2b and 2b + 1
      static_assert(G == 16, "an MXFP4 32-block has one scale");
      lo = block_scale(2 * b);
      hi = block_scale(2 * b + 1);
    }
    static float row_scale() { return 1.0f; }
    float at(int64_t k) const { return cursor.at(tail_start + k); }
  };
  Row row(int64_t o) const { return Row{fp4_row_cursor(w, o), table, 32 * blocks32()}; }
};

}  // namespace

template <class Packed>
bool gemv_fp4_x16_avx2(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  return avx2::run_gemv_x16(Fp4X16Decoder<Packed>{w, e2m1_word_table()}, bias, x, m, y);
}

template <class Packed>
void gemm_fp4_avx2_x16(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows || !gemv_fp4_x16_avx2(w, bias, x, m, y)) gemm_fp4_f32_avx2(w, bias, x, m, y);
}

template bool gemv_fp4_x16_avx2<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template bool gemv_fp4_x16_avx2<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template void gemm_fp4_avx2_x16<quant::Mxfp4Matrix>(const quant::Mxfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);
template void gemm_fp4_avx2_x16<quant::Nvfp4Matrix>(const quant::Nvfp4Matrix&, const float*, const float*, int64_t,
                                                    float*);

}  // namespace qjoule::kernels::detail

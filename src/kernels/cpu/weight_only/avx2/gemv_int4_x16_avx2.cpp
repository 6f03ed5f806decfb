// int4 weight-only decode on AVX2 with 16-bit integer activations ("qjoule:avx2:int4_x16", gemv_x16_avx2.h): a
// 32-block's 16 code bytes zero-extended to words (vpmovzxbw), its first elements (high nibbles) by one shift,
// its second (low nibbles) by one AND, as int16 lanes; two vpmaddwd with the activations' words, where the FP32
// GEMV spends a shift, an AND, a subtraction, a conversion and a multiplication on every 8 weights before its FMA.
// Exact in int32: Σ (u − z) · q = Σ u · q − z · Σ q over a block (the zero point once per block, off the sums of
// eight blocks at once), then the block's FP16 scale times the activations' s.
#include <type_traits>

#include "kernels/cpu/weight_only/avx2/gemv_x16_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

template <class Block>
struct Int4X16Decoder {
  static constexpr int G = Block::kSize, kSubBlocks = G / 32;
  static constexpr bool kHalfScales = false, kWholeBlockSums = true, kZeroPoints = true,
                        kPairs = false;  // |u − z| <= 15
  const quant::BlockMatrix<Block>& w;
  int64_t rows() const { return w.rows; }
  int64_t blocks32() const { return w.padded_cols() / 32; }
  static int64_t tail() { return 0; }  // padded_cols() is a multiple of G
  // Word j of a byte-extended block: byte j, whose high nibble is element 2j and low nibble element 2j + 1.
  static int element(int j) { return j < 16 ? 2 * j : 2 * (j - 16) + 1; }
  struct Row {
    const Block* blocks;
    static int zero(const Block& blk) {
      if constexpr (std::is_same_v<Block, quant::BlockInt4Asym<G>>) {
        return blk.zero;
      } else {
        return quant::kInt4SymZero;
      }
    }
    QJOULE_TARGET_AVX2 void codes(int64_t b, __m256i& lo, __m256i& hi) const {  // u, before the zero point
      const Block& blk = blocks[b / kSubBlocks];
      const __m256i bytes =
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs + 16 * (b % kSubBlocks))));
      lo = _mm256_srli_epi16(bytes, 4);
      hi = _mm256_and_si256(bytes, _mm256_set1_epi16(0x0F));
    }
    QJOULE_TARGET_AVX2 void block(int64_t b, __m256i& lo, __m256i& hi) const {  // u − z
      codes(b, lo, hi);
      const __m256i zz = _mm256_set1_epi16(static_cast<int16_t>(zero(blocks[b / kSubBlocks])));
      lo = _mm256_sub_epi16(lo, zz);
      hi = _mm256_sub_epi16(hi, zz);
    }
    QJOULE_TARGET_AVX2 __m256i zeros8(int64_t b) const {
      if constexpr (std::is_same_v<Block, quant::BlockInt4Asym<G>>) {
        const auto z = [&](int j) { return static_cast<int>(blocks[(b + j) / kSubBlocks].zero); };
        return _mm256_setr_epi32(z(0), z(1), z(2), z(3), z(4), z(5), z(6), z(7));
      } else {
        return _mm256_set1_epi32(quant::kInt4SymZero);
      }
    }
    QJOULE_TARGET_AVX2 float scale(int64_t b) const { return _cvtsh_ss(blocks[b / kSubBlocks].d); }
    QJOULE_TARGET_AVX2 __m256 scales8(int64_t b) const {
      const auto d = [&](int j) { return static_cast<int16_t>(blocks[(b + j) / kSubBlocks].d); };
      return _mm256_cvtph_ps(_mm_setr_epi16(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7)));
    }
    static float row_scale() { return 1.0f; }
    static float at(int64_t) { return 0.0f; }  // no tail
  };
  Row row(int64_t o) const { return Row{w.row(o)}; }
};

}  // namespace

template <class Block>
bool gemv_int4_x16_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  return avx2::run_gemv_x16(Int4X16Decoder<Block>{w}, bias, x, m, y);
}

template <class Block>
void gemm_int4_avx2_x16(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows || !gemv_int4_x16_avx2(w, bias, x, m, y)) gemm_int4_f32_avx2(w, bias, x, m, y);
}

#define QJOULE_INT4_X16_AVX2(BLOCK)                                                                              \
  template bool gemv_int4_x16_avx2<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                          float*);                                                               \
  template void gemm_int4_avx2_x16<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                          float*);
QJOULE_INT4_X16_AVX2(quant::BlockInt4Sym<32>)
QJOULE_INT4_X16_AVX2(quant::BlockInt4Sym<64>)
QJOULE_INT4_X16_AVX2(quant::BlockInt4Sym<128>)
QJOULE_INT4_X16_AVX2(quant::BlockInt4Asym<32>)
QJOULE_INT4_X16_AVX2(quant::BlockInt4Asym<64>)
QJOULE_INT4_X16_AVX2(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_X16_AVX2

}  // namespace qjoule::kernels::detail

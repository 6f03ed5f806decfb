// nf4 / nf4:dq weight-only decode on AVX2 with 16-bit integer activations ("qjoule:avx2:nf4_x16",
// "qjoule:avx2:nf4dq_x16", gemv_x16_avx2.h): the NF4 table as 16-bit integers T16 = round(T · 2^13), as the
// AVX512_VNNI x16 GEMV has it (|T16| <= 8192, off by at most 2^-14 of the block's absmax), looked up by two vpshufb
// a 32-block; the block's absmax (nf4:dq: decoded from its 8-bit code) over 2^13 scales the exact int32 sums.
#include <cmath>
#include <utility>

#include "kernels/cpu/weight_only/avx2/gemv_x16_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

constexpr float kNf4TableScale = 8192.0f;

QJOULE_TARGET_AVX2 avx2::WordTable nf4_word_table() {
  int16_t words[16];
  for (int c = 0; c < 16; ++c) words[c] = static_cast<int16_t>(std::nearbyint(quant::kNf4Table[c] * kNf4TableScale));
  return avx2::word_table(words);
}

// Packed: quant::Nf4Matrix (FP32 absmax) or quant::Nf4DqMatrix (8-bit absmax codes, decoded per block).
template <class Packed>
struct Nf4X16Decoder {
  static constexpr bool kHalfScales = false, kPairs = true;  // an NF4 block of 64 is a pair
  static constexpr bool kWholeBlockSums = false;  // 32 · 8192 · 32767 > 2^31: a block's sum stays in 8 lanes
  static constexpr bool kZeroPoints = false;
  const Packed& w;
  avx2::WordTable table;
  const float* map = quant::dynamic_map_signed().data();  // nf4:dq's absmax codes (read once a call)
  int64_t rows() const { return w.rows; }
  int64_t blocks32() const { return w.padded_cols() / 32; }
  static int64_t tail() { return 0; }  // padded_cols() is a multiple of 64
  static int element(int j) { return avx2::table_element(j); }
  struct Row {
    const Nf4X16Decoder& dec;
    decltype(std::declval<const Packed&>().row(0)) blocks;  // the row's NF4 blocks of 64
    int64_t first;                                          // the flat index of its first block
    QJOULE_TARGET_AVX2 void block(int64_t b, __m256i& lo, __m256i& hi) const {
      const uint8_t* qs = blocks[b / 2].qs + 16 * (b % 2);
      avx2::table_words(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)), dec.table, lo, hi);
    }
    float scale(int64_t b) const {
      if constexpr (std::is_same_v<Packed, quant::Nf4Matrix>) {
        return blocks[b / 2].absmax * (1.0f / kNf4TableScale);
      } else {
        // Packed::absmax(block), with the map's address read once a call.
        const int64_t flat = first + b / 2;
        const float absmax = element::nf4_dq_absmax(
            dec.map[blocks[b / 2].absmax_code],
            dec.w.absmax_scales[static_cast<std::size_t>(flat / quant::kNf4DoubleQuantGroup)], dec.w.absmax_mean);
        return absmax * (1.0f / kNf4TableScale);
      }
    }
    // Whole pairs, one NF4 block each (gemv_x16_avx2.h): its 32 code bytes in one load; pair_sums' lanes summed by
    // one hadd into [A A A A | B B B B], each lane 8 products (8 · 8192 · 32767 < 2^31: exact; a second hadd would
    // not be), converted once and scaled by the block's absmax times A's or B's activation scale.
    template <int MR>
    QJOULE_TARGET_AVX2 int64_t accumulate_pairs(const int16_t* q, const float* s, int64_t nb32,
                                                __m256 (&acc)[MR]) const {
      const __m256i halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
      int64_t b = 0;
      for (; b + 2 <= nb32; b += 2) {
        __m256i words[4];
        avx2::pair_words(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b / 2].qs)), dec.table, words);
        const __m256 d = _mm256_set1_ps(scale(b));
        for (int i = 0; i < MR; ++i) {
          __m256i low_half, high_half;  // elements 0..15 and 16..31 of A | B
          avx2::pair_sums(words, q + i * 32 * nb32 + 32 * b, low_half, high_half);
          const __m256 s2 = _mm256_castps128_ps256(  // s[b], s[b + 1]
              _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + i * nb32 + b))));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_hadd_epi32(low_half, high_half)),
                                   _mm256_mul_ps(d, _mm256_permutevar8x32_ps(s2, halves)), acc[i]);
        }
      }
      return b;
    }
    static float row_scale() { return 1.0f; }
    static float at(int64_t) { return 0.0f; }  // no tail
  };
  Row row(int64_t o) const { return Row{*this, w.row(o), o * w.blocks_per_row()}; }
};

}  // namespace

bool gemv_nf4_x16_avx2(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  return avx2::run_gemv_x16(Nf4X16Decoder<quant::Nf4Matrix>{w, nf4_word_table()}, bias, x, m, y);
}

void gemm_nf4_avx2_x16(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows || !gemv_nf4_x16_avx2(w, bias, x, m, y)) gemm_nf4_f32_avx2(w, bias, x, m, y);
}

void gemm_nf4dq_avx2_x16(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows ||
      !avx2::run_gemv_x16(Nf4X16Decoder<quant::Nf4DqMatrix>{w, nf4_word_table()}, bias, x, m, y)) {
    gemm_nf4dq_f32_avx2(w, bias, x, m, y);
  }
}

}  // namespace qjoule::kernels::detail

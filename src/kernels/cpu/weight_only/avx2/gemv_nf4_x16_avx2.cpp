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
  static constexpr bool kHalfScales = false;
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

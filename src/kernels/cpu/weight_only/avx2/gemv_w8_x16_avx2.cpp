// w8 weight-only decode on AVX2 with 16-bit integer activations ("qjoule:avx2:w8_x16", gemv_x16_avx2.h): a
// 32-block's codes sign-extended to words (two vpmovsxbw), two vpmaddwd with the activations' words, where the FP32
// GEMV converts and scales every 8 weights before its FMA; the row's FP32 scale once, on the row's sum. Columns past
// the last full 32-block in FP32.
#include "kernels/cpu/weight_only/avx2/gemv_x16_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

struct W8X16Decoder {
  static constexpr bool kHalfScales = false, kWholeBlockSums = true, kZeroPoints = false, kPairs = false;  // |w| <= 128
  const quant::Int8Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t blocks32() const { return w.cols / 32; }
  int64_t tail() const { return w.cols % 32; }
  static int element(int j) { return j; }  // natural order
  struct Row {
    const int8_t* q;
    const int8_t* tail_codes;
    float scale_;
    QJOULE_TARGET_AVX2 void block(int64_t b, __m256i& lo, __m256i& hi) const {
      lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32 * b)));
      hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 32 * b + 16)));
    }
    QJOULE_TARGET_AVX2 void codes(int64_t b, __m256i& lo, __m256i& hi) const { block(b, lo, hi); }
    static float scale(int64_t) { return 1.0f; }
    QJOULE_TARGET_AVX2 static __m256 scales8(int64_t) { return _mm256_set1_ps(1.0f); }
    float row_scale() const { return scale_; }
    float at(int64_t k) const { return static_cast<float>(tail_codes[k]) * scale_; }
  };
  Row row(int64_t o) const {
    const int8_t* q = w.q.data() + o * w.cols;
    return Row{q, q + 32 * blocks32(), w.scales[static_cast<std::size_t>(o)]};
  }
};

}  // namespace

bool gemv_w8_x16_avx2(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  return avx2::run_gemv_x16(W8X16Decoder{w}, bias, x, m, y);
}

void gemm_w8_avx2_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx2::kX16MaxRows || !gemv_w8_x16_avx2(w, bias, x, m, y)) gemm_w8_f32_avx2(w, bias, x, m, y);
}

}  // namespace qjoule::kernels::detail

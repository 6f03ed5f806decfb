// w8: INT8 per-row weights, sign-extended and converted 8 at a time, times the row's FP32 scale; FP32 FMA.
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

struct W8Decoder {
  const quant::Int8Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.cols; }
  static constexpr bool kPermuted = false;
  struct Row {
    const int8_t* q;
    float scale;
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {
      const __m256 s = _mm256_set1_ps(scale);
      for (int j = 0; j < 4; ++j) {
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k + 8 * j));
        out[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), s);
      }
    }
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      decode32(k, out);
      decode32(k + 32, out + 4);
    }
    QJOULE_TARGET_AVX2 float at(int64_t k) const { return static_cast<float>(q[k]) * scale; }
  };
  Row row(int64_t o) const { return Row{w.q.data() + o * w.cols, w.scales[static_cast<std::size_t>(o)]}; }
};

}  // namespace

void gemm_w8_f32_avx2(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(W8Decoder{w}, bias, x, m, y);
}

}  // namespace qjoule::kernels::detail

// fp16 weights, FP32 compute: 8 FP16 weights → 8 FP32 per vcvtph2ps (F16C), then FMA.
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

struct Fp16Decoder {
  const quant::Fp16Matrix& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.cols; }
  static constexpr bool kPermuted = false;
  struct Row {
    const uint16_t* p;
    QJOULE_TARGET_AVX2 void decode32(int64_t k, __m256 out[4]) const {
      for (int j = 0; j < 4; ++j)
        out[j] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k + 8 * j)));
    }
    QJOULE_TARGET_AVX2 void decode64(int64_t k, __m256 out[8]) const {
      decode32(k, out);
      decode32(k + 32, out + 4);
    }
    QJOULE_TARGET_AVX2 float at(int64_t k) const { return _cvtsh_ss(p[k]); }
  };
  Row row(int64_t o) const { return Row{w.bits.data() + o * w.cols}; }
};

}  // namespace

void gemm_fp16_f32_avx2(const quant::Fp16Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  avx2::run_weight_only_gemm(Fp16Decoder{w}, bias, x, m, y);
}

}  // namespace qjoule::kernels::detail

// The AVX2 quantizer of q8 activation blocks (quantize_rows_q8_act.h): per 32-block the absolute maximum,
// d = max / 127, q = round-half-even(x · (1 / d)) clamped to ±127, and Σ q, as the reference computes them.
#include <atomic>
#include <cfloat>

#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "qjoule/quant/quantize_activations_q8.h"

namespace qjoule::kernels::detail {
namespace {

using quant::BlockQ8Act;
using quant::kQ8ActBlockSize;

// Quantizes one row; false when it holds a NaN/Inf (the caller reports it through the reference).
QJOULE_TARGET_AVX2 bool quantize_row_q8_act_avx2(const float* x, int64_t n, BlockQ8Act* y) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int finite_mask = 0xFF;
  for (int64_t b = 0; b < n / kQ8ActBlockSize; ++b) {
    const float* xb = x + b * kQ8ActBlockSize;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[j]));
      finite_mask &= _mm256_movemask_ps(_mm256_cmp_ps(_mm256_sub_ps(v[j], v[j]), _mm256_setzero_ps(), _CMP_EQ_OQ));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!(id <= FLT_MAX)) id = 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], idv));  // round to nearest even (default MXCSR)
      q[j] = _mm256_min_epi32(_mm256_max_epi32(q[j], lo), hi);
      sum = _mm256_add_epi32(sum, q[j]);
    }
    const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), _mm256_permutevar8x32_epi32(p16, order));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    y[b].d = d;
    y[b].sum = _mm_cvtsi128_si32(s4);
  }
  return finite_mask == 0xFF;
}

}  // namespace

void quantize_rows_q8_act_avx2(const float* x, int64_t m, int64_t K, BlockQ8Act* xq, std::string_view layer) {
  const int64_t nb32 = K / kQ8ActBlockSize;
  std::atomic<int64_t> bad_row{-1};
#pragma omp parallel for schedule(static) if (m >= 8)
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_row_q8_act_avx2(x + i * K, K, xq + i * nb32)) {
      int64_t none = -1;
      bad_row.compare_exchange_strong(none, i);
    }
  }
  if (bad_row.load() >= 0) {  // let the reference name the layer, row and column
    const int64_t i = bad_row.load();
    quant::quantize_row_q8_act_ref(x + i * K, K, xq + i * nb32, layer, i);
  }
}

}  // namespace qjoule::kernels::detail

#include "kernels/cpu/quantize_symmetric_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/quant/element_math.h"

namespace qjoule::kernels {
namespace {

// Largest magnitude of one row; fails on NaN/Inf.
float row_abs_max_scalar(const float* v, int64_t cols, const std::string& what, int64_t row) {
  float a = 0.0f;
  for (int64_t k = 0; k < cols; ++k) {
    if (!std::isfinite(v[k])) {
      fail("{}: row {} column {} holds {}; symmetric INT8 quantization needs finite values", what, row, k, v[k]);
    }
    a = std::max(a, std::fabs(v[k]));
  }
  return a;
}

// inv = qmax / a and scale = a / qmax, or 0 and 0 for a (near-)zero row.
void row_scales(float a, int qmax, float& inv, float& scale) {
  element::symmetric_scales(a, static_cast<float>(qmax), inv, scale);
}

int code_scalar(float v, float inv, int qmax) {
  if (qmax == 127) return element::s8_code(v, inv);  // the GPU's formula too
  const float r = std::nearbyint(v * inv);           // default rounding mode: round half to even
  return static_cast<int>(std::clamp(r, -static_cast<float>(qmax), static_cast<float>(qmax)));
}

// Eight values into a running |max| and a poison mark: x - x is NaN exactly when x is NaN or ±Inf, and
// an unordered compare marks it.
__attribute__((target("avx2"), always_inline)) inline void take_abs_max8(const float* p, __m256 abs_mask, __m256& vmax,
                                                                         __m256& poison) {
  const __m256 x = _mm256_loadu_ps(p);
  vmax = _mm256_max_ps(vmax, _mm256_and_ps(x, abs_mask));
  poison = _mm256_or_ps(poison, _mm256_cmp_ps(_mm256_sub_ps(x, x), _mm256_setzero_ps(), _CMP_UNORD_Q));
}

// Four independent accumulators of each kind, so no step waits on the previous one's max (a 4-cycle
// chain); the rows mostly come from memory, so this took the function from 4.3% to 3.3% of an SST-2
// int8 batch of 32, not 4x.
__attribute__((target("avx2"))) float row_abs_max_avx2(const float* v, int64_t cols, const std::string& what,
                                                       int64_t row) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 poison[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32)
    for (int u = 0; u < 4; ++u) take_abs_max8(v + k + 8 * u, abs_mask, vmax[u], poison[u]);
  for (; k + 8 <= cols; k += 8) take_abs_max8(v + k, abs_mask, vmax[0], poison[0]);
  const __m256 all_max = _mm256_max_ps(_mm256_max_ps(vmax[0], vmax[1]), _mm256_max_ps(vmax[2], vmax[3]));
  const __m256 all_poison = _mm256_or_ps(_mm256_or_ps(poison[0], poison[1]), _mm256_or_ps(poison[2], poison[3]));
  if (_mm256_movemask_ps(all_poison) != 0) return row_abs_max_scalar(v, cols, what, row);  // names the column
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, all_max);
  float a = 0.0f;
  for (int l = 0; l < 8; ++l) a = std::max(a, lanes[l]);
  for (; k < cols; ++k) {
    if (!std::isfinite(v[k])) return row_abs_max_scalar(v, cols, what, row);  // the row's column, not the tail's
    a = std::max(a, std::fabs(v[k]));
  }
  return a;
}

// Eight values → eight int32 codes + 128.
__attribute__((target("avx2"))) inline __m256i shifted_codes8(const float* p, __m256 vinv) {
  __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(p), vinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_add_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(128));
}

__attribute__((target("avx2"))) void quantize_row_u8_avx2(const float* v, int64_t cols, float inv, uint8_t* q) {
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) {
    const __m256i ab = _mm256_packs_epi32(shifted_codes8(v + k, vinv), shifted_codes8(v + k + 8, vinv));
    const __m256i cd = _mm256_packs_epi32(shifted_codes8(v + k + 16, vinv), shifted_codes8(v + k + 24, vinv));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k), bytes);
  }
  for (; k < cols; ++k) q[k] = static_cast<uint8_t>(code_scalar(v[k], inv, 127) + 128);
}

// The row itself, or row · col_scale (elementwise, one FP32 multiply each) in a per-thread buffer.
const float* scaled_row(const float* row, int64_t cols, const float* col_scale) {
  if (col_scale == nullptr) return row;
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(cols));
  for (int64_t k = 0; k < cols; ++k) buffer[static_cast<size_t>(k)] = row[k] * col_scale[k];
  return buffer.data();
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

}  // namespace

void quantize_rows_symmetric_s8(const float* v, int64_t rows, int64_t cols, int qmax, int8_t* q, float* scales,
                                const std::string& what) {
  if (qmax < 1 || qmax > 127) fail("{}: INT8 qmax {} is out of range; expected 1..127", what, qmax);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = v + r * cols;
    float inv = 0.0f;
    row_scales(row_abs_max_scalar(row, cols, what, r), qmax, inv, scales[r]);
    for (int64_t k = 0; k < cols; ++k) q[r * cols + k] = static_cast<int8_t>(code_scalar(row[k], inv, qmax));
  }
}

void quantize_rows_symmetric_u8_shifted_scalar(const float* v, int64_t rows, int64_t cols, uint8_t* q, float* scales,
                                               const std::string& what, const float* col_scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = scaled_row(v + r * cols, cols, col_scale);
    float inv = 0.0f;
    row_scales(row_abs_max_scalar(row, cols, what, r), 127, inv, scales[r]);
    for (int64_t k = 0; k < cols; ++k) q[r * cols + k] = static_cast<uint8_t>(code_scalar(row[k], inv, 127) + 128);
  }
}

void quantize_rows_symmetric_u8_shifted(const float* v, int64_t rows, int64_t cols, uint8_t* q, float* scales,
                                        const std::string& what, const float* col_scale) {
  if (!cpu_has_avx2()) {
    quantize_rows_symmetric_u8_shifted_scalar(v, rows, cols, q, scales, what, col_scale);
    return;
  }
  // Errors thrown inside an OpenMP region must not escape it: keep the first and rethrow after.
  std::string error;
#pragma omp parallel for schedule(static) if (rows * cols >= (int64_t{1} << 15))
  for (int64_t r = 0; r < rows; ++r) {
    try {
      const float* row = scaled_row(v + r * cols, cols, col_scale);
      float inv = 0.0f;
      row_scales(row_abs_max_avx2(row, cols, what, r), 127, inv, scales[r]);
      quantize_row_u8_avx2(row, cols, inv, q + r * cols);
    } catch (const Error& e) {
#pragma omp critical(qjoule_quantize_rows_error)
      if (error.empty()) error = e.what();
    }
  }
  if (!error.empty()) throw Error(error);
}

void dequantize_row_s32_scalar(float* row, int64_t n, float sa, const int32_t* comp, const float* sw, const float* b) {
  constexpr int64_t kChunk = 256;
  int32_t acc[kChunk];
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t len = std::min(kChunk, n - j0);
    std::memcpy(acc, row + j0, static_cast<size_t>(len) * sizeof(int32_t));
    for (int64_t j = 0; j < len; ++j)
      row[j0 + j] = static_cast<float>(acc[j] - comp[j0 + j]) * (sa * sw[j0 + j]) + b[j0 + j];
  }
}

__attribute__((target("avx512f"))) void dequantize_row_s32_avx512(float* row, int64_t n, float sa, const int32_t* comp,
                                                                  const float* sw, const float* b) {
  const __m512 vsa = _mm512_set1_ps(sa);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - j)) - 1u);
    const __m512i acc = _mm512_maskz_loadu_epi32(k, row + j);
    // maskz form: GCC 12's unmasked cvtepi32_ps trips -Wmaybe-uninitialized on its "undefined" source.
    const __m512 d = _mm512_maskz_cvtepi32_ps(k, _mm512_sub_epi32(acc, _mm512_maskz_loadu_epi32(k, comp + j)));
    const __m512 scale = _mm512_mul_ps(vsa, _mm512_maskz_loadu_ps(k, sw + j));
    _mm512_mask_storeu_ps(row + j, k, _mm512_fmadd_ps(d, scale, _mm512_maskz_loadu_ps(k, b + j)));
  }
}

__attribute__((target("avx2,fma"))) void dequantize_row_s32_avx2(float* row, int64_t n, float sa, const int32_t* comp,
                                                                 const float* sw, const float* b) {
  const __m256 vsa = _mm256_set1_ps(sa);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t j = 0; j < n; j += 8) {
    const __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(n - j, 8))), lane);
    const __m256i acc = _mm256_maskload_epi32(reinterpret_cast<const int*>(row + j), k);
    const __m256 d = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc, _mm256_maskload_epi32(comp + j, k)));
    const __m256 scale = _mm256_mul_ps(vsa, _mm256_maskload_ps(sw + j, k));
    _mm256_maskstore_ps(row + j, k, _mm256_fmadd_ps(d, scale, _mm256_maskload_ps(b + j, k)));
  }
}

DequantizeRowS32 dequantize_row_s32_for_cpu() {
  static const DequantizeRowS32 fn = [] {
    if (__builtin_cpu_supports("avx512f")) return &dequantize_row_s32_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &dequantize_row_s32_avx2;
    return &dequantize_row_s32_scalar;
  }();
  return fn;
}

}  // namespace qjoule::kernels

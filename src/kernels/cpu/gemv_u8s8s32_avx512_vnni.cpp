#include "kernels/cpu/gemv_u8s8s32_avx512_vnni.h"

#include <immintrin.h>

#include <algorithm>

#include "qjoule/error.h"

#define QJOULE_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace qjoule::kernels {
namespace {

// Weight rows streamed together: one, so each thread reads one sequential stream (rows are contiguous).
// Measured (bench_linear, Zen 4, 2 threads, 1B-Llama shapes, alternating runs): one row at a time
// 45-67 GB/s, 4 rows at once (4 streams 1 row apart) 30-53 GB/s.
constexpr int64_t kRowsAtOnce = 1;
constexpr int64_t kRowsPerItem = 32;  // output rows per OpenMP work item

// Rows [j0, j0 + R) of c for MR activation rows.
template <int MR, int R>
QJOULE_TARGET_AVX512_VNNI void gemv_rows(const uint8_t* a, const int8_t* b, int64_t n, int64_t k, int64_t j0,
                                         int32_t* c) {
  __m512i acc[R][MR];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < MR; ++i) acc[r][i] = _mm512_setzero_si512();
  const int8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = b + (j0 + r) * k;
  int64_t t = 0;
  for (; t + 64 <= k; t += 64) {
    __m512i w[R];
    for (int r = 0; r < R; ++r) w[r] = _mm512_loadu_si512(rows[r] + t);
    for (int i = 0; i < MR; ++i) {
      const __m512i x = _mm512_loadu_si512(a + i * k + t);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], x, w[r]);
    }
  }
  if (t < k) {  // the last k % 64 bytes, masked (zeros add nothing)
    const __mmask64 mask = _cvtu64_mask64((~uint64_t{0}) >> (64 - (k - t)));
    __m512i w[R];
    for (int r = 0; r < R; ++r) w[r] = _mm512_maskz_loadu_epi8(mask, rows[r] + t);
    for (int i = 0; i < MR; ++i) {
      const __m512i x = _mm512_maskz_loadu_epi8(mask, a + i * k + t);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], x, w[r]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < MR; ++i) c[i * n + j0 + r] = _mm512_reduce_add_epi32(acc[r][i]);
}

template <int MR>
void gemv(const uint8_t* a, const int8_t* b, int64_t n, int64_t k, int32_t* c) {
  const int64_t items = (n + kRowsPerItem - 1) / kRowsPerItem;
#pragma omp parallel for schedule(static)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t j_end = std::min(n, (it + 1) * kRowsPerItem);
    int64_t j = it * kRowsPerItem;
    for (; j + kRowsAtOnce <= j_end; j += kRowsAtOnce) gemv_rows<MR, kRowsAtOnce>(a, b, n, k, j, c);
    for (; j < j_end; ++j) gemv_rows<MR, 1>(a, b, n, k, j, c);
  }
}

}  // namespace

bool cpu_supports_avx512_vnni() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return has;
}

void gemv_u8s8s32_avx512_vnni(const uint8_t* a, int64_t m, const int8_t* b, int64_t n, int64_t k, int32_t* c) {
  switch (m) {
    case 1: return gemv<1>(a, b, n, k, c);
    case 2: return gemv<2>(a, b, n, k, c);
    case 3: return gemv<3>(a, b, n, k, c);
    case 4: return gemv<4>(a, b, n, k, c);
    default: fail("u8s8s32 GEMV: m = {}; expected 1 to {}", m, kGemvU8S8S32MaxRows);
  }
}

}  // namespace qjoule::kernels

#include "kernels/cpu/gemm_bf16_avx2.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/bf16.h"

namespace qjoule::kernels {
namespace {

constexpr int kNr = 16;           // columns per panel / micro-tile
constexpr int kMr = 6;            // rows per micro-tile
constexpr int64_t kKc = 256;      // k block
constexpr int64_t kMc = 48;       // rows per thread tile (multiple of kMr)
constexpr int64_t kNcPanels = 8;  // panels per thread tile (128 columns)

// One micro-tile: rows [0, MR) of a (stride lda) times panel slice b (kc × 8 lanes) into c (stride
// ldc, `ncols` valid columns). first: start from the bias, otherwise accumulate onto c.
template <int MR>
__attribute__((target("avx2,fma"))) void micro_kernel(const float* a, int64_t lda, const uint32_t* b, int64_t kc,
                                                      float* c, int64_t ldc, int ncols, bool first,
                                                      const float* bias16) {
  __m256 acc[MR][2];
  alignas(32) float tmp[kNr];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (first) {
      acc[r][0] = _mm256_loadu_ps(bias16);
      acc[r][1] = _mm256_loadu_ps(bias16 + 8);
    } else if (ncols == kNr) {
      acc[r][0] = _mm256_loadu_ps(c + r * ldc);
      acc[r][1] = _mm256_loadu_ps(c + r * ldc + 8);
    } else {
      std::fill(tmp, tmp + kNr, 0.0f);
      std::copy(c + r * ldc, c + r * ldc + ncols, tmp);
      acc[r][0] = _mm256_load_ps(tmp);
      acc[r][1] = _mm256_load_ps(tmp + 8);
    }
  }
  const __m256i high_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t k = 0; k < kc; ++k) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + k * 8));
    const __m256 w_lo = _mm256_castsi256_ps(_mm256_slli_epi32(packed, 16));
    const __m256 w_hi = _mm256_castsi256_ps(_mm256_and_si256(packed, high_mask));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * lda + k);
      acc[r][0] = _mm256_fmadd_ps(x, w_lo, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, w_hi, acc[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (ncols == kNr) {
      _mm256_storeu_ps(c + r * ldc, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    } else {
      _mm256_store_ps(tmp, acc[r][0]);
      _mm256_store_ps(tmp + 8, acc[r][1]);
      std::copy(tmp, tmp + ncols, c + r * ldc);
    }
  }
}

using MicroKernel = void (*)(const float*, int64_t, const uint32_t*, int64_t, float*, int64_t, int, bool, const float*);
constexpr MicroKernel kKernels[kMr + 1] = {nullptr,         micro_kernel<1>, micro_kernel<2>, micro_kernel<3>,
                                           micro_kernel<4>, micro_kernel<5>, micro_kernel<6>};

}  // namespace

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

PackedBf16Weights pack_bf16_weights(const float* W, const float* bias, int64_t n, int64_t k) {
  PackedBf16Weights p;
  p.n = n;
  p.k = k;
  p.panels = (n + kNr - 1) / kNr;
  p.lanes.assign(static_cast<size_t>(p.panels * k * 8), 0u);
  p.bias.assign(static_cast<size_t>(p.panels * kNr), 0.0f);
  for (int64_t col = 0; col < n; ++col) {
    const int64_t panel = col / kNr, within = col % kNr;
    const int64_t lane = within % 8;
    const int shift = within < 8 ? 0 : 16;
    for (int64_t i = 0; i < k; ++i) {
      p.lanes[static_cast<size_t>((panel * k + i) * 8 + lane)] |= uint32_t{f32_to_bf16_bits(W[col * k + i])} << shift;
    }
    if (bias != nullptr) p.bias[static_cast<size_t>(col)] = bias[col];
  }
  return p;
}

void gemm_bf16_avx2(const float* a, int64_t m, const PackedBf16Weights& w, float* c) {
  const int64_t n = w.n, k = w.k;
  const int64_t row_tiles = (m + kMc - 1) / kMc;
  const int64_t col_tiles = (w.panels + kNcPanels - 1) / kNcPanels;
  const int64_t tiles = row_tiles * col_tiles;
#pragma omp parallel for schedule(dynamic) if (tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t row0 = (t % row_tiles) * kMc, row1 = std::min(m, row0 + kMc);
    const int64_t panel0 = (t / row_tiles) * kNcPanels, panel1 = std::min(w.panels, panel0 + kNcPanels);
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      for (int64_t i = row0; i < row1; i += kMr) {
        const int rows = static_cast<int>(std::min<int64_t>(kMr, row1 - i));
        for (int64_t p = panel0; p < panel1; ++p) {
          const int ncols = static_cast<int>(std::min<int64_t>(kNr, n - p * kNr));
          kKernels[rows](a + i * k + k0, k, w.lanes.data() + (p * k + k0) * 8, kc, c + i * n + p * kNr, n, ncols,
                         k0 == 0, w.bias.data() + p * kNr);
        }
      }
    }
  }
}

}  // namespace qjoule::kernels

// The AVX2 + FMA driver shared by every weight-only format: a format supplies a *decoder* and this
// file supplies the loops. Included only by the gemm_*_avx2.cpp files; every function that touches
// __m256 carries QJOULE_TARGET_AVX2, so the build needs no -march flag and the scalar path stays
// runnable on any x86-64 (dispatch: weight_only_isa()).
//
// A decoder D provides
//   static constexpr bool D::kPermuted;              // order of decode64's output, see below
//   int64_t D::rows() const, D::cols() const;        // W is [rows = out, cols = in]
//   D::Row D::row(int64_t o) const;                   // a cursor on row o of W
//   QJOULE_TARGET_AVX2 void Row::decode64(int64_t k, __m256 w[8]) const;  // W[o, k .. k+64), k % 64 == 0
//   QJOULE_TARGET_AVX2 void Row::decode32(int64_t k, __m256 w[4]) const;  // W[o, k .. k+32), natural order
//                                                     // (only for a cols % 64 >= 32 tail)
//   QJOULE_TARGET_AVX2 float Row::at(int64_t k) const;  // W[o, k], only for cols % 32 tails (fp16, w8)
//
// decode64's order. Natural (kPermuted = false): w[s] lane j = W[k + 8s + j]. Permuted (4-bit formats):
// w[s] lane j = W[k + 8j + (s ^ 1)] — the order in which 64 packed nibbles come out of 8 dword lanes
// shifted right by 4s (nibble order: formats.h), so decoding needs no byte shuffles. The driver
// applies the same permutation to the rows of x once per call (permute_row_like_nibbles); a dot
// product does not depend on the order of its terms. Only full 64-chunks are permuted.
//
// Two loop nests (see linear_weight_only.h for the why):
//   m <= kDirectMaxRows: gemv_rows — decode 64 weights in registers, FMA them into up to 4 rows of x.
//   otherwise:           tiled_task — decode a kPanelRows × kTileK tile of W into an FP32 buffer
//                        once, then run the 4×3 dot-product micro-kernel over up to kRowChunk rows.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#define QJOULE_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace qjoule::kernels::avx2 {

constexpr int64_t kDirectMaxRows = 7;    // m up to this: GEMV-style, weights decoded per use
constexpr int64_t kDirectOutChunk = 16;  // output features per OpenMP work item in the direct path
constexpr int64_t kPanelRows = 48;       // W rows per decoded tile (multiple of kNr)
constexpr int64_t kTileK = 512;          // W columns per decoded tile (multiple of 64)
constexpr int64_t kRowChunk = 256;       // x rows per work item in the tiled path
constexpr int kMr = 4;                   // micro-kernel: kMr rows of x ...
constexpr int kNr = 3;                   // ... times kNr rows of W

// ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)): the order of hsum8 / hsum12 below, so that a dot product gives
// the same bits whether its tile is full (hsum12) or not (hsum): an output does not depend on the layer's width
// or on where its row falls in a panel (a model whose q, k and v are one layer or three gives the same bits).
QJOULE_TARGET_AVX2 inline float hsum(__m256 v) {
  const __m256 pairs = _mm256_hadd_ps(v, v);          // v0+v1, v2+v3, .. | v4+v5, v6+v7, ..
  const __m256 quads = _mm256_hadd_ps(pairs, pairs);  // (v0+v1)+(v2+v3) | (v4+v5)+(v6+v7)
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(quads), _mm256_extractf128_ps(quads, 1)));
}

// y[i, o] for i < MR, o in [o_begin, o_end): x and y hold rows i at x + i*K, y + i*N (x already in
// the decoder's order).
template <class Dec, int MR>
QJOULE_TARGET_AVX2 void gemv_rows(const Dec& dec, const float* x, const float* bias, float* y, int64_t o_begin,
                                  int64_t o_end) {
  constexpr int kAcc = MR == 1 ? 4 : 2;  // independent FMA chains per row
  const int64_t K = dec.cols(), N = dec.rows();
  const int64_t K64 = K - K % 64, K32 = K - K % 32;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto row = dec.row(o);
    __m256 acc[MR][kAcc];
    for (int i = 0; i < MR; ++i)
      for (int a = 0; a < kAcc; ++a) acc[i][a] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K64; k += 64) {
      __m256 w[8];
      row.decode64(k, w);
      for (int i = 0; i < MR; ++i) {
        const float* xi = x + i * K + k;
        for (int j = 0; j < 8; ++j)
          acc[i][j % kAcc] = _mm256_fmadd_ps(w[j], _mm256_loadu_ps(xi + 8 * j), acc[i][j % kAcc]);
      }
    }
    if (K32 > K64) {
      __m256 w[4];
      row.decode32(K64, w);
      for (int i = 0; i < MR; ++i) {
        const float* xi = x + i * K + K64;
        for (int j = 0; j < 4; ++j)
          acc[i][j % kAcc] = _mm256_fmadd_ps(w[j], _mm256_loadu_ps(xi + 8 * j), acc[i][j % kAcc]);
      }
    }
    for (int i = 0; i < MR; ++i) {
      __m256 sum = acc[i][0];
      for (int a = 1; a < kAcc; ++a) sum = _mm256_add_ps(sum, acc[i][a]);
      float r = hsum(sum);
      for (int64_t k = K32; k < K; ++k) r += row.at(k) * x[i * K + k];
      y[i * N + o] = r + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template <class Dec>
QJOULE_TARGET_AVX2 void gemv_rows_dispatch(int64_t mr, const Dec& dec, const float* x, const float* bias, float* y,
                                           int64_t o_begin, int64_t o_end) {
  switch (mr) {
    case 1: gemv_rows<Dec, 1>(dec, x, bias, y, o_begin, o_end); break;
    case 2: gemv_rows<Dec, 2>(dec, x, bias, y, o_begin, o_end); break;
    case 3: gemv_rows<Dec, 3>(dec, x, bias, y, o_begin, o_end); break;
    default: gemv_rows<Dec, 4>(dec, x, bias, y, o_begin, o_end); break;
  }
}

// Horizontal sums of 8 vectors at once: lane i of the result = sum of v[i]'s lanes.
QJOULE_TARGET_AVX2 inline __m256 hsum8(const __m256 v[8]) {
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));  // 0 1 2 3 | 0 1 2 3
  const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));  // 4 5 6 7 | 4 5 6 7
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

// out[i][j] = hsum(acc[i][j]) for the full kMr × kNr tile (12 sums: one hsum8 and one half).
QJOULE_TARGET_AVX2 inline void hsum12(const __m256 (&acc)[kMr][kNr], float (&out)[kMr][kNr]) {
  const __m256 first[8] = {acc[0][0], acc[0][1], acc[0][2], acc[1][0], acc[1][1], acc[1][2], acc[2][0], acc[2][1]};
  alignas(32) float sums[8];
  _mm256_store_ps(sums, hsum8(first));
  const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(acc[2][2], acc[3][0]), _mm256_hadd_ps(acc[3][1], acc[3][2]));
  alignas(16) float rest[4];
  _mm_store_ps(rest, _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1)));
  for (int q = 0; q < 8; ++q) out[q / kNr][q % kNr] = sums[q];
  for (int q = 0; q < 4; ++q) out[(8 + q) / kNr][(8 + q) % kNr] = rest[q];
}

// out[i][j] = Σ_k x[i*ldx + k] · w[j*ldw + k] for k < kc: MR × NR dot products, 8-wide accumulators.
template <int MR, int NR>
QJOULE_TARGET_AVX2 void micro_dot(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t kc,
                                  float (&out)[kMr][kNr]) {
  __m256 acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= kc; k += 8) {
    __m256 wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = _mm256_loadu_ps(w + j * ldw + k);
    for (int i = 0; i < MR; ++i) {
      const __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  if constexpr (MR == kMr && NR == kNr) {  // the full tile: 12 horizontal sums at once
    hsum12(acc, out);
  } else {
    for (int i = 0; i < MR; ++i)
      for (int j = 0; j < NR; ++j) out[i][j] = hsum(acc[i][j]);
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      for (int64_t kk = k; kk < kc; ++kk) out[i][j] += x[i * ldx + kk] * w[j * ldw + kk];
    }
  }
}

template <int MR>
QJOULE_TARGET_AVX2 void micro_dot_nr(int64_t nr, const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t kc,
                                     float (&out)[kMr][kNr]) {
  switch (nr) {
    case 1: micro_dot<MR, 1>(x, ldx, w, ldw, kc, out); break;
    case 2: micro_dot<MR, 2>(x, ldx, w, ldw, kc, out); break;
    default: micro_dot<MR, 3>(x, ldx, w, ldw, kc, out); break;
  }
}

QJOULE_TARGET_AVX2 inline void micro_dot_dispatch(int64_t mr, int64_t nr, const float* x, int64_t ldx, const float* w,
                                                  int64_t ldw, int64_t kc, float (&out)[kMr][kNr]) {
  switch (mr) {
    case 1: micro_dot_nr<1>(nr, x, ldx, w, ldw, kc, out); break;
    case 2: micro_dot_nr<2>(nr, x, ldx, w, ldw, kc, out); break;
    case 3: micro_dot_nr<3>(nr, x, ldx, w, ldw, kc, out); break;
    default: micro_dot_nr<4>(nr, x, ldx, w, ldw, kc, out); break;
  }
}

// Rows [i_begin, i_end) of y, output features [o0, o0 + nc) (nc <= kPanelRows); tile: kPanelRows × kTileK floats.
template <class Dec>
QJOULE_TARGET_AVX2 void tiled_task(const Dec& dec, const float* x, int64_t i_begin, int64_t i_end, const float* bias,
                                   float* y, int64_t o0, int64_t nc, float* tile) {
  const int64_t K = dec.cols(), N = dec.rows();
  for (int64_t k0 = 0; k0 < K; k0 += kTileK) {
    const int64_t kc = std::min(kTileK, K - k0);
    const int64_t kc64 = kc - kc % 64, kc32 = kc - kc % 32;
    for (int64_t j = 0; j < nc; ++j) {  // decode W[o0 .. o0+nc, k0 .. k0+kc) into the tile (x's order)
      const auto row = dec.row(o0 + j);
      float* t = tile + j * kTileK;
      for (int64_t k = 0; k < kc64; k += 64) {
        __m256 w[8];
        row.decode64(k0 + k, w);
        for (int q = 0; q < 8; ++q) _mm256_storeu_ps(t + k + 8 * q, w[q]);
      }
      if (kc32 > kc64) {
        __m256 w[4];
        row.decode32(k0 + kc64, w);
        for (int q = 0; q < 4; ++q) _mm256_storeu_ps(t + kc64 + 8 * q, w[q]);
      }
      for (int64_t k = kc32; k < kc; ++k) t[k] = row.at(k0 + k);
    }
    for (int64_t i0 = i_begin; i0 < i_end; i0 += kMr) {
      const int64_t mr = std::min<int64_t>(kMr, i_end - i0);
      for (int64_t j0 = 0; j0 < nc; j0 += kNr) {
        const int64_t nr = std::min<int64_t>(kNr, nc - j0);
        float out[kMr][kNr];
        micro_dot_dispatch(mr, nr, x + i0 * K + k0, K, tile + j0 * kTileK, kTileK, kc, out);
        for (int64_t i = 0; i < mr; ++i) {
          for (int64_t j = 0; j < nr; ++j) {
            const int64_t o = o0 + j0 + j;
            float* yp = y + (i0 + i) * N + o;
            const float base = k0 == 0 ? (bias != nullptr ? bias[o] : 0.0f) : *yp;
            *yp = base + out[i][j];
          }
        }
      }
    }
  }
}

// xp = x in the permuted order of decode64 (full 64-chunks; the rest copied as is).
inline void permute_row_like_nibbles(const float* x, int64_t K, float* xp) {
  const int64_t K64 = K - K % 64;
  for (int64_t k = 0; k < K64; k += 64)
    for (int s = 0; s < 8; ++s)
      for (int j = 0; j < 8; ++j) xp[k + 8 * s + j] = x[k + 8 * j + (s ^ 1)];
  for (int64_t k = K64; k < K; ++k) xp[k] = x[k];
}

// The whole product, multi-threaded. Not itself AVX2-targeted: OpenMP outlines the loop bodies, which
// call the targeted functions above. Work items are coarse and handed out dynamically (robust to a
// shared machine); each output element is still computed by one thread in a fixed order, so results
// do not depend on the thread count or schedule.
template <class Dec>
void run_weight_only_gemm(const Dec& dec, const float* bias, const float* x_in, int64_t m, float* y) {
  const int64_t N = dec.rows(), K = dec.cols();
  if (m <= 0 || N <= 0) return;
  const float* x = x_in;
  std::vector<float> x_permuted;
  if constexpr (Dec::kPermuted) {
    x_permuted.resize(static_cast<std::size_t>(m * K));
#pragma omp parallel for schedule(static) if (m >= 16)
    for (int64_t i = 0; i < m; ++i) permute_row_like_nibbles(x_in + i * K, K, x_permuted.data() + i * K);
    x = x_permuted.data();
  }
  if (m <= kDirectMaxRows) {
    const int64_t chunks = (N + kDirectOutChunk - 1) / kDirectOutChunk;
#pragma omp parallel for schedule(dynamic)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t o_begin = c * kDirectOutChunk, o_end = std::min(N, o_begin + kDirectOutChunk);
      for (int64_t i0 = 0; i0 < m; i0 += kMr) {
        gemv_rows_dispatch(std::min<int64_t>(kMr, m - i0), dec, x + i0 * K, bias, y + i0 * N, o_begin, o_end);
      }
    }
    return;
  }
  const int64_t panels = (N + kPanelRows - 1) / kPanelRows;
  const int64_t row_chunks = (m + kRowChunk - 1) / kRowChunk;
#pragma omp parallel
  {
    std::vector<float> tile(static_cast<std::size_t>(kPanelRows * kTileK));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < panels * row_chunks; ++t) {
      const int64_t p = t / row_chunks, c = t % row_chunks;
      const int64_t o0 = p * kPanelRows;
      tiled_task(dec, x, c * kRowChunk, std::min(m, (c + 1) * kRowChunk), bias, y, o0, std::min(kPanelRows, N - o0),
                 tile.data());
    }
  }
}

// 32 unsigned 4-bit values from 16 bytes in qjoule's nibble order (first element in the high nibble):
// lo = elements 0..15, hi = elements 16..31, one value per byte.
QJOULE_TARGET_AVX2 inline void unpack_nibbles32(const uint8_t* qs, __m128i& lo, __m128i& hi) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i first = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);  // elements 0, 2, 4, ...
  const __m128i second = _mm_and_si128(bytes, mask);                    // elements 1, 3, 5, ...
  lo = _mm_unpacklo_epi8(first, second);
  hi = _mm_unpackhi_epi8(first, second);
}

}  // namespace qjoule::kernels::avx2

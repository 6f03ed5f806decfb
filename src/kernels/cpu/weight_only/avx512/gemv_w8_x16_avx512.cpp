// w8 weight-only decode on 16-bit integer activations ("qjoule:avx512:w8_x16", m <= 4): the activations
// per 32-block as 16-bit integers (quantize_block_x16.h: 2^-16 of the block's largest, where BF16 keeps
// 2^-9 of each value), the stored INT8 codes widened to 16 bits by one vpmovsxbw, and the block's 32
// products summed in int32 by one vpmaddwd (|Σ| <= 32 · 127 · 32767 < 2^28: exact); then one conversion
// and one FMA by the block's scale, and the row's scale once at the end. Per 32 weights and activation
// row: one vpmaddwd, one conversion, one FMA, where the BF16 GEMV spends two vpermw table lookups and two
// vdpbf16ps (half the FMA rate on Intel cores). AVX512BW only: no VNNI instruction is needed.
// The last K % 32 weights multiply the FP32 activations one by one.
#include <immintrin.h>

#include <vector>

#include "kernels/cpu/weight_only/quantize_block_x16.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_avx512.h"

namespace qjoule::kernels::detail {
namespace {

constexpr int64_t kBlock = 32;

// One row of x: xq[32b .. 32b + 31] the 16-bit codes of block b (natural order), xs[b] its scale.
// False when a full block holds a NaN or ±Inf.
QJOULE_TARGET_AVX512 bool quantize_row_w8_x16(const float* x, int64_t blocks, int16_t* xq, float* xs) {
  __mmask16 bad = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const BlockX16 block = quantize_block_x16(x + b * kBlock);
    bad |= block.bad;
    xs[b] = block.s;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + b * kBlock), _mm512_cvtepi32_epi16(block.q0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + b * kBlock + 16), _mm512_cvtepi32_epi16(block.q1));
  }
  return bad == 0;
}

constexpr int kChains = 4;  // FMA chains a row: consecutive blocks do not wait on one accumulator

// acc[i][chain] += s_ib · Σ_{k in block b} q_k · xq_ik for the activation rows i < MR.
template <int MR>
QJOULE_TARGET_AVX512 inline __attribute__((always_inline)) void add_block_x16(const int8_t* q, const int16_t* xq,
                                                                              const float* xs, int64_t Kb,
                                                                              int64_t blocks, int64_t b,
                                                                              __m512 (&acc)[MR][kChains], int chain) {
  const __m512i wv = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * kBlock)));
  for (int i = 0; i < MR; ++i) {
    const __m512i t = _mm512_madd_epi16(wv, _mm512_loadu_si512(xq + i * Kb + b * kBlock));
    acc[i][chain] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(xs[i * blocks + b]), acc[i][chain]);
  }
}

// y[i, o] for i < MR, o in [o_begin, o_end); xq / xs: row i at xq + i · 32 · blocks, xs + i · blocks.
template <int MR>
QJOULE_TARGET_AVX512 void gemv_w8_x16_rows(const quant::Int8Matrix& w, const int16_t* xq, const float* xs,
                                           const float* x, const float* bias, float* y, int64_t o_begin,
                                           int64_t o_end) {
  const int64_t K = w.cols, N = w.rows, blocks = K / kBlock, Kb = blocks * kBlock;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const int8_t* q = w.q.data() + o * K;
    __m512 acc[MR][kChains];
    for (int i = 0; i < MR; ++i)
      for (int c = 0; c < kChains; ++c) acc[i][c] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + kChains <= blocks; b += kChains) {  // chains by constant index: the accumulators stay in registers
      add_block_x16<MR>(q, xq, xs, Kb, blocks, b, acc, 0);
      add_block_x16<MR>(q, xq, xs, Kb, blocks, b + 1, acc, 1);
      add_block_x16<MR>(q, xq, xs, Kb, blocks, b + 2, acc, 2);
      add_block_x16<MR>(q, xq, xs, Kb, blocks, b + 3, acc, 3);
    }
    for (; b < blocks; ++b) add_block_x16<MR>(q, xq, xs, Kb, blocks, b, acc, 0);
    const float scale = w.scales[static_cast<std::size_t>(o)];
    for (int i = 0; i < MR; ++i) {
      float tail = 0.0f;
      for (int64_t k = Kb; k < K; ++k) tail += static_cast<float>(q[k]) * x[i * K + k];
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3]));
      y[i * N + o] = (_mm512_reduce_add_ps(sum) + tail) * scale + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

// The x16 GEMV for m <= kGemvMaxRows rows of x; false, y untouched, when x holds a NaN or ±Inf.
bool gemv_w8_x16_avx512(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  const int64_t K = w.cols, blocks = K / kBlock;
  if (m <= 0 || w.rows <= 0) return true;
  thread_local std::vector<int16_t> xq;  // reused: no allocation per decode step
  thread_local std::vector<float> xs;
  xq.resize(static_cast<std::size_t>(m * blocks * kBlock));
  xs.resize(static_cast<std::size_t>(m * blocks));
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_row_w8_x16(x + i * K, blocks, xq.data() + i * blocks * kBlock, xs.data() + i * blocks)) return false;
  }
  // Pointers taken here: inside the OpenMP threads the thread_local names are each thread's own vectors.
  const int16_t* a = xq.data();
  const float* a_scales = xs.data();
  avx512::with_rows(m, [&](auto mr) {
    avx512::for_each_row_block(0, w.rows, [&](int64_t o_begin, int64_t o_end) {
      gemv_w8_x16_rows<decltype(mr)::value>(w, a, a_scales, x, bias, y, o_begin, o_end);
    });
  });
  return true;
}

}  // namespace

void gemm_w8_avx512_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !gemv_w8_x16_avx512(w, bias, x, m, y)) gemm_w8_avx512(w, bias, x, m, y);
}
void gemm_w8_avx512_bf16_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !gemv_w8_x16_avx512(w, bias, x, m, y)) gemm_w8_avx512_bf16(w, bias, x, m, y);
}

}  // namespace qjoule::kernels::detail

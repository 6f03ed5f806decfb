// qjoule's GEMVs for decode-sized products (m <= kGemvDenseMaxRows activation rows) of the unquantized
// formats, FP32 and BF16 weights held in Hugging Face's [out, in] row-major layout:
//   y[i, j] = Σ_t x[i, t] · W[j, t] + bias[j]
// Each weight row is streamed once, 64 bytes at a time (FP32: 4 rows at once, one activation load shared
// by the 4 rows; BF16: one row at a time, as measured best), and reduced at the row's end; the threads split the output
// rows, each row computed by one thread in a fixed order (the result does not depend on the thread
// count). FP32: one FMA per 16 weights. BF16: activations already rounded to BF16 by the caller, one
// vdpbf16ps per 32 weights (products of BF16 values are exact in FP32; FP32 accumulation), the same
// arithmetic as oneDNN's avx512_core_bf16 matmul. Why: oneDNN 2.6 reads FP32/BF16 weights at 60-74% of
// the triad bandwidth at m = 1 (bench_linear, Zen 4); decode is a stream over the weights. Tested against
// linear_f32_ref / linear_bf16_ref (test_gemv_dense_avx512).
#pragma once

#include <cstdint>

namespace qjoule::kernels {

constexpr int64_t kGemvDenseMaxRows = 4;

// AVX512F + AVX512BW + AVX512VL (+ AVX512_BF16 for the BF16 GEMV), checked once.
bool cpu_supports_gemv_f32_avx512();
bool cpu_supports_gemv_bf16_avx512();

// m in [1, kGemvDenseMaxRows]; bias: [n] or nullptr. Multi-threaded with OpenMP.
void gemv_f32_avx512(const float* x, int64_t m, const float* w, const float* bias, int64_t n, int64_t k, float* y);
// x, w: BF16 bit patterns ([m, k] and [n, k]).
void gemv_bf16_avx512(const uint16_t* x, int64_t m, const uint16_t* w, const float* bias, int64_t n, int64_t k,
                      float* y);

}  // namespace qjoule::kernels

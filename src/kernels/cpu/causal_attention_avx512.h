// Causal self-attention over an FP32 KV cache on AVX-512 (causal_attention_f32's kernel where the CPU has
// AVX512F/BW/VL and head_dim <= kAttentionAvx512MaxHeadDim): the query heads that share a KV head are taken
// together, a few at a time, so each V row is loaded once for them; the scores of 16 keys are summed as one
// transposition of their 16 partial-sum registers (no horizontal sum a key), exp is a vector polynomial
// (exp_ps_avx512, within 2 ulp of expf), and the PV products accumulate in registers.
//
// One query row's result depends only on that row, its keys and the cache: not on how many tokens or heads run
// together, nor on the thread count (a decode step gives exactly what a prefill gave for the same position).
// Budget against causal_attention_f32_ref (double): 1e-5 absolute on unit-scale inputs, as the generic loop.
#pragma once

#include <cstdint>

namespace qjoule::kernels {

constexpr int64_t kAttentionAvx512MaxHeadDim = 256;

// The first cache row a query at `position` reads: position − window + 1 with a sliding window > 0 (Hugging Face's
// mask: position − key < window), else 0. The generic loop (decoder_ops.cpp) and this kernel both start there.
inline int64_t first_attended_key(int64_t position, int64_t window) {
  return window > 0 && position + 1 > window ? position + 1 - window : 0;
}

// AVX512F + AVX512BW + AVX512VL, checked once.
bool cpu_supports_attention_avx512();

// causal_attention_f32's contract (qjoule/kernels/decoder_ops.h), already checked; head_dim in
// [1, kAttentionAvx512MaxHeadDim]. Multi-threaded with OpenMP over (KV head, heads of its group, token).
void causal_attention_f32_avx512(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                 int64_t kv_stride, int64_t past, int64_t n_new, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, float scale, float* ctx, int64_t window);

// e^x for 16 lanes (x <= 0 in attention; any x works below 88.7; NaN stays NaN), for the tests.
void exp_ps_avx512_for_test(const float* x, float* y, int64_t n);

}  // namespace qjoule::kernels

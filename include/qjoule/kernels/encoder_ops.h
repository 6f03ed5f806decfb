// The non-GEMM operations of an encoder, in FP32 on the CPU, each with a scalar `_ref` twin.
#pragma once

#include <cstdint>

namespace qjoule::kernels {

// x[r, :] = LayerNorm(x[r, :] + residual[r, :]) · gamma + beta, in place (residual may be nullptr).
void add_layer_norm_f32(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                        const float* beta, float eps);
void add_layer_norm_f32_ref(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                            const float* beta, float eps);

// Element-wise activations, in place.
void gelu_erf_f32(float* x, int64_t n);      // 0.5·x·(1 + erf(x/√2)), PyTorch's exact GELU (oneDNN eltwise)
void gelu_erf_f32_ref(float* x, int64_t n);  // the same with libm's erff
void relu_f32(float* x, int64_t n);
void tanh_f32(float* x, int64_t n);

// Rounds each value to the nearest BF16 (round to nearest even) in place, keeping FP32 storage:
// an activation tensor that a BF16 pipeline would hand to the next operation.
void round_to_bf16_f32(float* x, int64_t n);
void round_to_bf16_f32_ref(float* x, int64_t n);

// Multi-head self-attention with a key padding mask.
// q, k, v: [batch·seq, row_stride] row-major, head h in columns [h·head_dim, (h+1)·head_dim).
// mask: [batch, seq], 1 = real token, 0 = padding (masked keys get probability 0).
// ctx: [batch·seq, heads·head_dim] = softmax(q·kᵀ/√head_dim + mask)·v per head.
void attention_f32(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx);
void attention_f32_ref(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                       int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx);

}  // namespace qjoule::kernels

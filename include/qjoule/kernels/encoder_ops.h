// The non-GEMM operations of an encoder, in FP32 on the CPU, each with a scalar `_ref` twin.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace qjoule::kernels {

// The instruction set LayerNorm, exp and attention run on: the best the CPU has (avx512 needs
// AVX512F, avx2 needs AVX2 + FMA), "scalar" being portable C++ compiled for the baseline x86-64.
// The AVX-512 and AVX2 paths are the same code (encoder_ops_simd.inc) on 16- and 8-wide vectors.
enum class EncoderOpsIsa { scalar, avx2, avx512 };
EncoderOpsIsa encoder_ops_isa();
bool encoder_ops_isa_supported(EncoderOpsIsa isa);
// Forces a (lower) ISA, for tests; one the CPU lacks is an error. std::nullopt: the best again.
void set_encoder_ops_isa(std::optional<EncoderOpsIsa> isa);
std::string_view encoder_ops_isa_name(EncoderOpsIsa isa);  // "scalar", "avx2", "avx512"

// x[r, :] = LayerNorm(x[r, :] + residual[r, :]) · gamma + beta, in place (residual may be nullptr).
void add_layer_norm_f32(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                        const float* beta, float eps);
void add_layer_norm_f32_ref(float* x, const float* residual, int64_t rows, int64_t cols, const float* gamma,
                            const float* beta, float eps);

// e^x in place, as the attention softmax computes it. The vector paths use Cephes' expf
// (x = n·ln2 + r, |r| ≤ ln2/2, degree-6 polynomial, result scaled by 2^n): relative error within
// 4 ulp (2^-21) of the correctly rounded value; results below FLT_MIN (x < -87.33) are flushed to 0,
// x > 88.72 gives +Inf and NaN stays NaN. The scalar path and the _ref twin are std::exp.
void exp_f32(float* x, int64_t n);
void exp_f32_ref(float* x, int64_t n);

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
// The vector paths compute each head as two register-blocked products (scores for 4 queries × 64
// keys at a time on AVX-512, × 16 on AVX2, then the context the same way over channels) with exp_f32's
// exponential, normalizing once per row at the end; keys after a sequence's last real one are skipped.
void attention_f32(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                   int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx);
void attention_f32_ref(const float* q, const float* k, const float* v, int64_t row_stride, const int32_t* mask,
                       int64_t batch, int64_t seq, int64_t heads, int64_t head_dim, float* ctx);

}  // namespace qjoule::kernels

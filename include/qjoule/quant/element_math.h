// Per-element arithmetic shared by the CPU kernels and quantizers (their scalar `_ref` twins included)
// and the CUDA kernels: one definition, compiled by the host compiler and by nvcc (__host__ __device__),
// and tested
// on the CPU (tests/kernels/cpu/test_element_math.cpp), so that the GPU computes each element the way the
// CPU tests hold the CPU to.
#pragma once

#include <math.h>  // erff, tanhf, expf in the global namespace, as CUDA device code has them

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define QJOULE_HOST_DEVICE __host__ __device__
#else
#define QJOULE_HOST_DEVICE
#endif

namespace qjoule::element {

QJOULE_HOST_DEVICE inline uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

QJOULE_HOST_DEVICE inline float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// FP32 → BF16 bits, round to nearest even; NaN stays a (quiet) NaN, values that round past the
// largest BF16 become ±Inf.
QJOULE_HOST_DEVICE inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

QJOULE_HOST_DEVICE inline float bf16_bits_to_f32(uint16_t h) { return float_of(uint32_t{h} << 16); }

// The FP32 value nearest-even-rounded to BF16 precision (exactly representable as BF16).
QJOULE_HOST_DEVICE inline float round_to_bf16(float f) { return bf16_bits_to_f32(f32_to_bf16_bits(f)); }

// PyTorch's exact GELU, 0.5·x·(1 + erf(x/√2)).
QJOULE_HOST_DEVICE inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }

// GPT-2's "gelu_new": 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
QJOULE_HOST_DEVICE inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
}

// SwiGLU's silu(gate) · up = gate / (1 + e^-gate) · up.
QJOULE_HOST_DEVICE inline float silu_mul(float gate, float up) { return gate / (1.0f + expf(-gate)) * up; }

// One rotary pair (a, b) = (x[i], x[i + head_dim/2]) of a token at `position`, Hugging Face's
// rotate_half convention: angle = position · inv_freq in double, cos and sin times `factor`.
QJOULE_HOST_DEVICE inline void rope_rotate(float& a, float& b, int64_t position, float inv_freq, float factor) {
  const double angle = static_cast<double>(position) * static_cast<double>(inv_freq);
  const double c = cos(angle) * factor, s = sin(angle) * factor;
  const double x = a, y = b;
  a = static_cast<float>(x * c - y * s);
  b = static_cast<float>(y * c + x * s);
}

// max(x, 0) with NaN kept (std::max(x, 0.0f) semantics).
QJOULE_HOST_DEVICE inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

// ---- formats (layouts: qjoule/quant/formats.h) --------------------------------------------------

// The 4-bit code of element i of a block's packed bytes: element 2j in the high nibble of byte j,
// element 2j + 1 in its low nibble (int4 and NF4 alike).
QJOULE_HOST_DEVICE inline int nibble_of_bytes(const uint8_t* qs, int64_t i) {
  const uint8_t byte = qs[i / 2];
  return (i % 2 == 0) ? (byte >> 4) : (byte & 0x0F);
}

// The same for element e (0..7) of 8 weights whose 4 bytes were loaded as one little-endian word.
QJOULE_HOST_DEVICE inline int nibble_of_word(uint32_t word, int e) {
  return static_cast<int>((word >> (8 * (e / 2) + (e % 2 == 0 ? 4 : 0))) & 0xFu);
}

// NF4 with double quantization: the absmax of a block, map[code] · scale of its group of 256 + mean,
// rounded to FP32 after the product and after the sum (never one fused multiply-add).
QJOULE_HOST_DEVICE inline float nf4_dq_absmax(float map_value, float group_scale, float mean) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(map_value, group_scale), mean);
#else
  // GCC contracts a · b + c into an FMA in C++ (-ffp-contract=fast is its default outside ISO C) wherever the
  // caller's target has FMA (the AVX2 / AVX-512 kernels); the empty asm keeps the product rounded on its own.
  float product = map_value * group_scale;
  __asm__("" : "+x"(product));
  return product + mean;
#endif
}

// Symmetric per-row (per-token) quantization to [-qmax, qmax]: inv = qmax / amax and scale = amax /
// qmax, or 0 and 0 for a row whose absmax is below kZeroRowBelow (all codes 0, outputs 0).
inline constexpr float kZeroRowBelow = 1e-30f;
QJOULE_HOST_DEVICE inline void symmetric_scales(float amax, float qmax, float& inv, float& scale) {
  if (amax < kZeroRowBelow) {
    inv = 0.0f;
    scale = 0.0f;
  } else {
    inv = qmax / amax;
    scale = amax / qmax;
  }
}

// The INT8 code of v: v · inv rounded half to even (rintf in the default rounding mode), clamped to
// [-127, 127].
QJOULE_HOST_DEVICE inline int s8_code(float v, float inv) {
  return static_cast<int>(fminf(fmaxf(rintf(v * inv), -127.0f), 127.0f));
}

}  // namespace qjoule::element

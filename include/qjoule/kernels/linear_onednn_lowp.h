// Low-precision linear layers whose matrix products really run in the named format: BF16 and
// INT8 W8A8 (dynamic). Each reports the kernel that runs (`kernel_path`) and has a plain scalar
// `_ref` twin the tests compare against.
//
// bf16 — weights stored as BF16 (round to nearest even), activations rounded to BF16 at run time,
//   products accumulated in FP32. Kernel, in order of preference:
//     oneDNN's bf16 matmul when it has a native (non-reference) one for this CPU (AVX512_BF16/AMX),
//       kernel_path "onednn:<impl>:bf16bf16f32";
//     qjoule's AVX2+FMA kernel otherwise — oneDNN 2.6 has NO bf16 matmul on AVX2 — which keeps the
//       weights packed as BF16, widens them in registers and uses FP32 FMA:
//       "qjoule:avx2:bf16w_bf16a_f32acc";
//     a scalar loop on CPUs without AVX2: "qjoule:scalar:bf16w_bf16a_f32acc".
//   It never silently becomes FP32: inputs are BF16-rounded on every path.
//
// int8 (W8A8 dynamic) — per-output-channel symmetric INT8 weights, scale_j = max|W_j| / qmax;
//   activations quantized per token (row of x) at run time, symmetric, scale_i = max|x_i| / 127;
//   INT8×INT8→INT32 products in a u8×s8 matmul: for m <= 4 rows on CPUs with AVX512_VNNI, qjoule's
//   GEMV (gemv_u8s8s32_avx512_vnni.h, "qjoule:avx512_vnni:u8s8s32_gemv,m>4:onednn:..."), otherwise
//   oneDNN's (the s8 activation codes are shifted by +128
//   into u8 and the shift is removed exactly with the weight column sums: Σ(q+128)w = Σqw + 128·Σw);
//   dequantization y = acc · scale_i · scale_j + b_j in one pass after the matmul.
//   qmax is 127 on CPUs whose int8 GEMM accumulates without int16 saturation (VNNI), and 63 on
//   AVX2/AVX-512 without VNNI, where oneDNN's vpmaddubsw-based GEMM would otherwise saturate (see
//   gemm_u8s8s32.h); kernel_path says which, e.g. "onednn:gemm:jit:u8s8s32:w7bit".
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {

// W: [out, in] FP32 row-major; bias: [out] or nullptr. Both are converted and copied; non-finite
// weights are rejected with an error naming `tensor_name`.
std::unique_ptr<Linear> make_linear_bf16(const float* W, const float* bias, int64_t out, int64_t in,
                                         const std::string& tensor_name);
// smoothing [in] (or nullptr): SmoothQuant factors s applied without touching the model's other
// tensors (qjoule/quant/smoothquant.h, way (b)): the layer quantizes W·diag(s) and multiplies each
// activation by 1/s inside the per-token quantizer, so y still approximates x·Wᵀ + b.
std::unique_ptr<Linear> make_linear_int8_w8a8(const float* W, const float* bias, int64_t out, int64_t in,
                                              const std::string& tensor_name, const float* smoothing = nullptr);

// The weight code range the int8 W8A8 kernel uses on this CPU (127 or 63, measured once).
int int8_w8a8_weight_qmax();

// Scalar twins. bf16: round x and W to BF16, accumulate in double, add bias.
void linear_bf16_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in, float* y);
// int8: quantize W per channel to [−weight_qmax, weight_qmax] and x per token to [−127, 127] with the
// same formulas as the kernel, integer dot products, then y = float(acc) · (scale_i · scale_j) + b_j.
// With smoothing: W[j, k]·s[k] and x[i, k]·(1/s[k]) are quantized instead.
void linear_int8_w8a8_ref(const float* x, int64_t m, const float* W, const float* bias, int64_t out, int64_t in,
                          int weight_qmax, float* y, const float* smoothing = nullptr);

}  // namespace qjoule::kernels

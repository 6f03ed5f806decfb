// Entry points of qjoule's weight-only GEMM kernels, one per format and ISA:
//   y[m, rows] = x[m, K] · Wᵀ + bias   (W packed as in qjoule/quant/formats.h; bias may be null)
// with K = w.padded_cols(): a block format whose rows end in a partial block is multiplied over its
// padded width, so x must hold K columns, zero beyond w.cols (WeightOnlyLinear::forward pads them).
// Every entry is multi-threaded with OpenMP over output features (qjoule::kernels::set_num_threads).
// The _avx2 entries need AVX2 + FMA + F16C, the _avx512 entries AVX512F/BW/VL/DQ as well, the
// _avx512_bf16 entries AVX512_BF16 and oneDNN's native BF16 matmul too (checked by the caller:
// weight_only_isa()).
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

void gemm_fp16_f32_avx2(const quant::Fp16Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_fp16_f32_scalar(const quant::Fp16Matrix& w, const float* bias, const float* x, int64_t m, float* y);

void gemm_w8_f32_avx2(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_w8_f32_scalar(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);

// The decode GEMVs on AVX2 with 16-bit integer activations per 32-block (avx2/gemv_x16_avx2.h): any m, meant for
// m <= 4; false, with y untouched, when x holds a NaN or ±Inf. The gemm_*_avx2_x16 entries: the AVX2 kernel with
// decode (m <= 4) on them where x is finite, the FP32 one otherwise.
bool gemv_w8_x16_avx2(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_w8_avx2_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
bool gemv_nf4_x16_avx2(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4_avx2_x16(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_avx2_x16(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>  // quant::Mxfp4Matrix or quant::Nvfp4Matrix
bool gemv_fp4_x16_avx2(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_avx2_x16(const Packed& w, const float* bias, const float* x, int64_t m, float* y);

// Block: quant::BlockInt4Sym<G> or quant::BlockInt4Asym<G>, G = 32, 64, 128.
template <class Block>
void gemm_int4_f32_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
template <class Block>
void gemm_int4_f32_scalar(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
// int4's AVX2 x16 decode GEMV and entry, as w8's above (gemv_int4_x16_avx2.cpp).
template <class Block>
bool gemv_int4_x16_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
template <class Block>
void gemm_int4_avx2_x16(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
// Activations quantized per 32-block to INT8 (quant::BlockQ8Act) inside the call; `layer` names the
// layer when an activation is NaN/Inf.
template <class Block>
void gemm_int4_s8_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                       std::string_view layer);
template <class Block>
void gemm_int4_s8_scalar(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                         std::string_view layer);
// The AVX2 kernel with one vpdpbusd a 32-block in place of vpmaddubsw + vpmaddwd, on CPUs with AVX-VNNI (the
// VEX form, without AVX-512: cpu_supports_avx_vnni()); the same bits. Its twin on the EVEX form (AVX512_VNNI +
// VL) runs the same code where AVX-VNNI is absent, for the tests.
bool cpu_supports_avx_vnni();
template <class Block>
void gemm_int4_s8_avx_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                           std::string_view layer);
template <class Block>
void gemm_int4_s8_avx512vl_vnni_for_test(const quant::BlockMatrix<Block>& w, const float* bias, const float* x,
                                         int64_t m, float* y, std::string_view layer);
// The same arithmetic on AVX512_VNNI (cpu_supports_avx512_vnni()), every m: vpdpbusd on the stored
// codes, four activation rows per pass over the weights (gemm_int4_s8_avx512_vnni.cpp).
template <class Block>
void gemm_int4_s8_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                              float* y, std::string_view layer);

// The int4 weight-only decode GEMV on AVX512_VNNI (cpu_supports_avx512_vnni()): activations as 16-bit
// integers per 32-block in two INT8 limbs (gemv_int4_x16_avx512_vnni.cpp); any m, meant for m <= 4.
// False, with y untouched, when x holds a NaN or ±Inf.
template <class Block>
bool gemv_int4_x16_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                               float* y);

// AVX-512 entries, one per ISA level: _avx512 (FP32 GEMV for m <= 4, the AVX2 kernel above) and
// _avx512_bf16 (BF16 GEMV for the 4-bit formats, FP32 for w8; the BF16 panel prefill), see
// weight_only_avx512.h.
void gemm_w8_avx512(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_w8_avx512_bf16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
// The same entries with decode (m <= 4) on 16-bit integer activations where x is finite
// (gemv_w8_x16_avx512.cpp; decode_gemv_choice.h says when).
void gemm_w8_avx512_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_w8_avx512_bf16_x16(const quant::Int8Matrix& w, const float* bias, const float* x, int64_t m, float* y);
template <class Block>
void gemm_int4_avx512(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
template <class Block>
void gemm_int4_avx512_bf16(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
// The same entries with decode (m <= 4) on gemv_int4_x16_avx512_vnni where x is finite (decode_gemv_choice.h).
template <class Block>
void gemm_int4_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y);
template <class Block>
void gemm_int4_avx512_bf16_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                                float* y);
void gemm_nf4_avx512(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4_avx512_bf16(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_avx512(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_avx512_bf16(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);
// nf4 / nf4:dq with decode (m <= 4) on the x16 GEMV where x is finite (weight_only_gemv_x16_avx512.h).
void gemm_nf4_avx512_vnni(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4_avx512_bf16_vnni(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_avx512_vnni(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_avx512_bf16_vnni(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);

void gemm_nf4_f32_avx2(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4_f32_scalar(const quant::Nf4Matrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_f32_avx2(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);
void gemm_nf4dq_f32_scalar(const quant::Nf4DqMatrix& w, const float* bias, const float* x, int64_t m, float* y);

// mxfp4 / nvfp4 (Packed: quant::Mxfp4Matrix or quant::Nvfp4Matrix), the forms nf4 has: the scalar twin,
// AVX2, the two AVX-512 levels, and both with decode (m <= 4) on the x16 GEMV where x is finite
// (gemm_fp4_avx512.cpp; decode_gemv_choice.h says when).
template <class Packed>
void gemm_fp4_f32_scalar(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_f32_avx2(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_avx512(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_avx512_bf16(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_avx512_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y);
template <class Packed>
void gemm_fp4_avx512_bf16_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y);

#define QJOULE_INT4_GEMM_EXTERN(BLOCK)                                                                                 \
  extern template void gemm_int4_f32_avx2<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,         \
                                                 int64_t, float*);                                                     \
  extern template void gemm_int4_avx512<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t,  \
                                               float*);                                                                \
  extern template void gemm_int4_avx512_bf16<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,      \
                                                    int64_t, float*);                                                  \
  extern template void gemm_int4_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,      \
                                                    int64_t, float*);                                                  \
  extern template void gemm_int4_avx512_bf16_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, \
                                                         int64_t, float*);                                             \
  extern template bool gemv_int4_x16_avx2<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,         \
                                                 int64_t, float*);                                                     \
  extern template void gemm_int4_avx2_x16<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,         \
                                                 int64_t, float*);                                                     \
  extern template void gemm_int4_f32_scalar<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,       \
                                                   int64_t, float*);                                                   \
  extern template void gemm_int4_s8_avx2<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                                float*, std::string_view);                                             \
  extern template void gemm_int4_s8_scalar<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,        \
                                                  int64_t, float*, std::string_view);                                  \
  extern template void gemm_int4_s8_avx_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,      \
                                                    int64_t, float*, std::string_view);                                \
  extern template void gemm_int4_s8_avx512vl_vnni_for_test<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*,      \
                                                                  const float*, int64_t, float*, std::string_view);    \
  extern template void gemm_int4_s8_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,   \
                                                       int64_t, float*, std::string_view);                             \
  extern template bool gemv_int4_x16_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*,  \
                                                        int64_t, float*);
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Sym<32>)
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Sym<64>)
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Sym<128>)
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Asym<32>)
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Asym<64>)
QJOULE_INT4_GEMM_EXTERN(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_GEMM_EXTERN

}  // namespace qjoule::kernels::detail

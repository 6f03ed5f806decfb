// The avx512_bf16 level's kernels on weights repacked at load (int4, nf4, nf4:dq, mxfp4, nvfp4): the x16 kernel
// decodes (m <= 4), and the prefill (m > 4) multiplies the rows' panels decoded from the repacked layout
// (repacked_panel_rows_avx512.h), on oneDNN's BF16 matmul (AMX tiles where Linux grants them) or its FP32 one,
// as panel_kind() chose; kernel path "qjoule:avx512_vnni:<format>_x16_repacked,m>4:bf16_panel+onednn:...".
// Each layout below decodes its scales as the rows' decoders do (gemm_weight_only_avx512.cpp, gemm_fp4_avx512.cpp),
// so the panels are theirs, weight for weight.
#include "kernels/cpu/weight_only/avx512/nf4_panel_absmax_avx512.h"
#include "kernels/cpu/weight_only/avx512/repacked_panel_rows_avx512.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/repacked/fp4_repacked.h"
#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "kernels/cpu/weight_only/repacked/nf4_repacked.h"

namespace qjoule::kernels::detail {
namespace {

template <class Block>
struct Int4Layout {
  static constexpr int kScaleBlock = Block::kSize;
  static constexpr bool kHasZero = RepackedInt4<Block>::kAsym;
  const RepackedInt4<Block>& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  // sym: T[u] = u − 8 (the implicit zero folded in); asym: T[u] = u, the group's zero point subtracted.
  QJOULE_TARGET_AVX512_BF16 __m512 table() const {
    const __m512 u = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    return kHasZero ? u : _mm512_sub_ps(u, _mm512_set1_ps(float(quant::kInt4SymZero)));
  }
  float table_at(int u) const { return static_cast<float>(kHasZero ? u : u - quant::kInt4SymZero); }
  const uint8_t* codes(int64_t p) const { return w.panel(p); }
  int64_t panel_bytes() const { return w.panel_stride(); }
  QJOULE_TARGET_AVX512_BF16 void scales(int64_t p, int64_t g, __m512& d, __m512& z) const {
    const uint8_t* panel = w.panel(p);
    d = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + w.scales_offset() + g * kRepackedRows * 2)));
    if constexpr (kHasZero) {
      z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(panel + w.zeros_offset() + g * kRepackedRows * 2))));
    }
  }
};

// nf4 and nf4:dq (kDq: the absmax decoded from its 8-bit code, PanelAbsmax, as the x16 kernel decodes it).
template <bool kDq>
struct Nf4Layout {
  static constexpr int kScaleBlock = static_cast<int>(quant::kNf4BlockSize);
  static constexpr bool kHasZero = false;
  const RepackedNf4& w;
  PanelAbsmax absmax{w};
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  QJOULE_TARGET_AVX512_BF16 __m512 table() const { return _mm512_loadu_ps(quant::kNf4Table.data()); }
  float table_at(int u) const { return quant::kNf4Table[static_cast<std::size_t>(u)]; }
  const uint8_t* codes(int64_t p) const { return w.panel(p); }
  int64_t panel_bytes() const { return w.panel_stride(); }
  QJOULE_TARGET_AVX512_BF16 void scales(int64_t p, int64_t g, __m512& d, __m512&) const {
    d = absmax.at<kDq>(w.panel(p), kDq ? absmax.first_blocks(p) : _mm512_setzero_si512(), g);
  }
};

// mxfp4 / nvfp4: E2M1 · (s_b · s_t), the block's scale byte decoded by the table fp4_scales.h keeps.
template <class Packed>
struct Fp4Layout {
  using Repacked = RepackedFp4<Packed>;
  static constexpr int kScaleBlock = Repacked::Block::kSize;
  static constexpr bool kHasZero = false;
  const Repacked& w;
  const float* scale_values;  // fp4_scale_table's
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  QJOULE_TARGET_AVX512_BF16 __m512 table() const { return _mm512_loadu_ps(quant::kE2M1Table.data()); }
  float table_at(int u) const { return quant::kE2M1Table[static_cast<std::size_t>(u)]; }
  const uint8_t* codes(int64_t p) const { return w.panel(p); }
  int64_t panel_bytes() const { return w.panel_stride(); }
  QJOULE_TARGET_AVX512_BF16 void scales(int64_t p, int64_t s, __m512& d, __m512&) const {
    const uint8_t* bytes = w.scale_bytes(w.panel(p), s / Repacked::kScalesPerBlock32, s % Repacked::kScalesPerBlock32);
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    d = _mm512_mul_ps(_mm512_i32gather_ps(codes, scale_values, 4), _mm512_set1_ps(w.tensor_scale));
  }
};

}  // namespace

template <class Block>
void gemm_int4_repacked_avx512_bf16_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                         float* y) {
  if (m <= avx512::kGemvMaxRows) return gemm_int4_x16_repacked_avx512_vnni(w, bias, x, m, y);
  repacked_rows::panel_prefill(Int4Layout<Block>{w}, bias, x, m, y);
}

void gemm_nf4_repacked_avx512_bf16_vnni(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m <= avx512::kGemvMaxRows) return gemm_nf4_x16_repacked_avx512_vnni(w, bias, x, m, y);
  if (w.double_quant) return repacked_rows::panel_prefill(Nf4Layout<true>{w}, bias, x, m, y);
  repacked_rows::panel_prefill(Nf4Layout<false>{w}, bias, x, m, y);
}

template <class Packed>
void gemm_fp4_repacked_avx512_bf16_vnni(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m,
                                        float* y) {
  if (m <= avx512::kGemvMaxRows) return gemm_fp4_x16_repacked_avx512_vnni(w, bias, x, m, y);
  repacked_rows::panel_prefill(Fp4Layout<Packed>{w, fp4_scale_table(Packed{})}, bias, x, m, y);
}

#define QJOULE_INT4_REPACKED_BF16(BLOCK)                                                                           \
  template void gemm_int4_repacked_avx512_bf16_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, \
                                                           int64_t, float*);
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Sym<32>)
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Sym<64>)
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Sym<128>)
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Asym<32>)
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Asym<64>)
QJOULE_INT4_REPACKED_BF16(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_REPACKED_BF16
template void gemm_fp4_repacked_avx512_bf16_vnni<quant::Mxfp4Matrix>(const RepackedFp4<quant::Mxfp4Matrix>&,
                                                                     const float*, const float*, int64_t, float*);
template void gemm_fp4_repacked_avx512_bf16_vnni<quant::Nvfp4Matrix>(const RepackedFp4<quant::Nvfp4Matrix>&,
                                                                     const float*, const float*, int64_t, float*);

}  // namespace qjoule::kernels::detail

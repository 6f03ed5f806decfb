// int4 weights × FP32 activations on AVX512_VNNI over weights repacked at load into 16-row panels
// ("qjoule:avx512_vnni:int4_x16_repacked", every m; layout: int4_repacked.h, loops:
// repacked_panels_avx512_vnni.h): the activations made 16-bit integers per 32-block as the x16 decode GEMV
// makes them (quantize_block_x16.h: 2^-16 of the block's largest value, where a BF16 panel keeps 2^-9 of
// each value), split into two INT8 limbs q = 256·h + l (h signed, l unsigned), which meet the repacked
// codes u in vpdpbusd: Σ u·h (codes unsigned × h signed) and Σ l·u (l unsigned × codes signed, u <= 15),
// exact in int32, so per block
//   Σ (u − z)·q = 256·(Σ u·h − z·Σ h) + (Σ u·l − z·Σ l)
// (the zero point by one vpmaddwd: z·Σl + 256z·Σh, both words within 16 bits), then one conversion and
// one FMA by d_w · s. Sixteen vpdpbusd a 32-block, panel and activation row. A row holding a NaN or Inf
// is multiplied by the FP32 twin (gemm_int4_f32_repacked_ref), as IEEE arithmetic has it.
#include <vector>

#include "kernels/cpu/weight_only/avx512_vnni/repacked_panels_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_block_x16.h"

namespace qjoule::kernels::detail {
namespace {

// 32 activations as 16-bit integers in two limbs, in their own order.
struct X16Block {
  int8_t h[32];       // high limbs, q >> 8 (arithmetic)
  uint8_t l[32];      // low limbs, q & 0xFF
  uint32_t neg_sums;  // low word −Σl (Σl <= 32·255), high word −Σh (|Σh| <= 32·128)
  float s;            // the block's scale
};

struct X16Act {
  using Block = X16Block;
  struct Sums {
    __m512i th, tl;
  };
  // Words z and 256·z, for the low and the high limbs' sums.
  QJOULE_TARGET_REPACKED_VNNI static __m512i zero_words(__m512i z) {
    return _mm512_or_si512(z, _mm512_slli_epi32(z, 24));
  }
  QJOULE_TARGET_REPACKED_VNNI static Sums start(__m512i zz, const Block& a) {
    return {_mm512_setzero_si512(), _mm512_madd_epi16(zz, _mm512_set1_epi32(static_cast<int32_t>(a.neg_sums)))};
  }
  QJOULE_TARGET_REPACKED_VNNI static void add(Sums& s, __m512i lo, __m512i hi, const Block& a, int j) {
    s.th = _mm512_dpbusd_epi32(s.th, lo, repacked::broadcast4(a.h + 8 * j));
    s.th = _mm512_dpbusd_epi32(s.th, hi, repacked::broadcast4(a.h + 8 * j + 4));
    s.tl = _mm512_dpbusd_epi32(s.tl, repacked::broadcast4(a.l + 8 * j), lo);
    s.tl = _mm512_dpbusd_epi32(s.tl, repacked::broadcast4(a.l + 8 * j + 4), hi);
  }
  QJOULE_TARGET_REPACKED_VNNI static __m512i total(const Sums& s) {
    return _mm512_add_epi32(s.tl, _mm512_slli_epi32(s.th, 8));
  }
  static float scale(const Block& a) { return a.s; }
};

// One row of nb32 blocks; false when it holds a NaN or ±Inf.
QJOULE_TARGET_REPACKED_VNNI bool quantize_row_x16_limbs(const float* x, int64_t nb32, X16Block* out) {
  __mmask16 bad = 0;
  for (int64_t b = 0; b < nb32; ++b) {
    const BlockX16 block = quantize_block_x16(x + b * kRepackedBlock);
    bad |= block.bad;
    X16Block& o = out[b];
    store_x16_limbs(block.q0, o.h, o.l);
    store_x16_limbs(block.q1, o.h + 16, o.l + 16);
    o.neg_sums = x16_neg_limb_sums(block);
    o.s = block.s;
  }
  return bad == 0;
}

}  // namespace

template <class Block>
void gemm_int4_x16_repacked_avx512_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                        float* y) {
  if (m <= 0 || w.rows <= 0) return;
  const int64_t nb32 = w.blocks32();
  repacked::quantize_then_run_panels<X16Block>(
      x, m, nb32, [&](const float* row, X16Block* out) { return quantize_row_x16_limbs(row, nb32, out); },
      [&](const X16Block* blocks) { repacked::run_panels<X16Act>(w, blocks, m, bias, y); },
      [&] { gemm_int4_f32_repacked_ref(w, bias, x, m, y); });
}

#define QJOULE_INT4_X16_REPACKED(BLOCK)                                                                           \
  template void gemm_int4_x16_repacked_avx512_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, \
                                                          int64_t, float*);
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Sym<32>)
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Sym<64>)
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Sym<128>)
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Asym<32>)
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Asym<64>)
QJOULE_INT4_X16_REPACKED(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_X16_REPACKED

}  // namespace qjoule::kernels::detail

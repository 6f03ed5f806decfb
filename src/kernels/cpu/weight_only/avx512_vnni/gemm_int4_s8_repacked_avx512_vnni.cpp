// int4 weights × INT8 activations on AVX512_VNNI over weights repacked at load into 16-row panels
// ("qjoule:avx512_vnni:int4_s8_repacked"; layout: int4_repacked.h, loops: repacked_panels_avx512_vnni.h).
// The arithmetic of gemm_int4_s8_scalar: per 32-block the exact integer Σ (u − z)·q, scaled by d_w · d_x
// into an FP32 accumulator. Per 32-block and panel: four 64-byte loads of codes, their low and high
// nibbles (one AND, one shift and AND each), and per activation row eight vpdpbusd with four activations
// broadcast from the q8 block as it is laid out (no reordering of the activations), −z·Σq by one
// vpmaddwd, one conversion and one FMA. The row-wise quads kernel (gemm_int4_s8_avx512_vnni.cpp) spends
// about three times the instructions a weight (in the caches, on a Zen 4 at 2 threads: 124 GB/s of
// weights against its 46).
#include <vector>

#include "kernels/cpu/weight_only/avx512_vnni/repacked_panels_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"

namespace qjoule::kernels::detail {
namespace {

// q8 activation blocks as quantize_rows_q8_act_avx2 writes them.
struct Q8Act {
  using Block = quant::BlockQ8Act;
  struct Sums {
    __m512i t;
  };
  QJOULE_TARGET_REPACKED_VNNI static __m512i zero_words(__m512i z) { return z; }  // words (z, 0)
  // −z·Σq: words (z, 0) · (−Σq, 0); |Σq| <= 32 · 127 fits a word.
  QJOULE_TARGET_REPACKED_VNNI static Sums start(__m512i z, const Block& a) {
    return {_mm512_madd_epi16(z, _mm512_set1_epi32(static_cast<uint16_t>(-a.sum)))};
  }
  QJOULE_TARGET_REPACKED_VNNI static void add(Sums& s, __m512i lo, __m512i hi, const Block& a, int j) {
    s.t = _mm512_dpbusd_epi32(s.t, lo, repacked::broadcast4(a.qs + 8 * j));
    s.t = _mm512_dpbusd_epi32(s.t, hi, repacked::broadcast4(a.qs + 8 * j + 4));
  }
  QJOULE_TARGET_REPACKED_VNNI static __m512i total(const Sums& s) { return s.t; }
  static float scale(const Block& a) { return a.d; }
};

}  // namespace

template <class Block>
void gemm_int4_s8_repacked_avx512_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                       float* y, std::string_view layer) {
  if (m <= 0 || w.rows <= 0) return;
  thread_local std::vector<quant::BlockQ8Act> xq;  // reused: no allocation per decode step
  xq.resize(static_cast<std::size_t>(m * w.blocks32()));
  quantize_rows_q8_act_avx2(x, m, w.padded_cols(), xq.data(), layer);
  repacked::run_panels<Q8Act>(w, xq.data(), m, bias, y);
}

#define QJOULE_INT4_S8_REPACKED(BLOCK)                                                                           \
  template void gemm_int4_s8_repacked_avx512_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*, \
                                                         int64_t, float*, std::string_view);
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<32>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<64>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Sym<128>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<32>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<64>)
QJOULE_INT4_S8_REPACKED(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_S8_REPACKED

}  // namespace qjoule::kernels::detail

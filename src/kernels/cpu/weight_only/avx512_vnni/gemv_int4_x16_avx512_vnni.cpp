// int4 weight-only decode on AVX512_VNNI ("qjoule:avx512_vnni:int4_x16"): the activations, not the
// weights, are made integers, at 16 bits per 32-block (quantize_block_x16.h: 2^-16 of the block's largest
// activation, where BF16 rounding is 2^-9 of each value), split into two INT8 limbs q = 256·h + l (h
// signed, l unsigned).
// The weights' 4-bit codes u meet both limbs in vpdpbusd as they are stored (int4_quads_avx512_vnni.h):
// Σ u·h (u unsigned × h signed) and Σ l·u (l unsigned × u signed: u <= 15), exact in int32, so
//   Σ (u − z)·q = 256·(Σ u·h − z·Σ h) + (Σ u·l − z·Σ l)
// per block (the zero point by one vpmaddwd: z·Σl + 256z·Σh, both words within 16 bits), then one
// conversion and one FMA by d_w · s. Four vpdpbusd per 128 weights and activation row, where the BF16
// GEMV spends four vpermw and four vdpbf16ps (half the FMA rate on Intel cores).
#include <vector>

#include "kernels/cpu/weight_only/avx512_vnni/int4_quads_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_block_x16.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

using vnni::kBlock;
using vnni::kBlocksPerQuad;

// Four blocks of 16-bit activations in the order a weight quad's registers meet them.
struct alignas(64) X16ActQuad {
  int8_t h_odd[64];   // lane j (16 bytes): high limbs of elements 1, 3, .., 31 of block j
  int8_t h_even[64];  // lane j: high limbs of elements 0, 2, .., 30
  uint8_t l_odd[64];  // low limbs, as h
  uint8_t l_even[64];
  float s[16];            // lane l: the scale of block l / 4
  uint32_t neg_sums[16];  // lane 4j: −Σl of block j in its low word, −Σh in its high word; other lanes 0
};
static_assert(sizeof(X16ActQuad) == 384);

// One row of nb32 blocks of activations into its quads (blocks past nb32: zeros); false when the row
// holds a NaN or ±Inf (nothing a quantized integer can stand for).
QJOULE_TARGET_AVX512_VNNI bool quantize_row_x16(const float* x, int64_t nb32, X16ActQuad* quads) {
  std::memset(static_cast<void*>(quads), 0, sizeof(X16ActQuad) * static_cast<std::size_t>(vnni::quads_of(nb32)));
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __mmask16 bad = 0;
  for (int64_t b = 0; b < nb32; ++b) {
    const BlockX16 block = quantize_block_x16(x + b * kBlock);
    bad |= block.bad;
    const __m512i q0 = block.q0, q1 = block.q1;
    X16ActQuad& quad = quads[b / kBlocksPerQuad];
    const int j = static_cast<int>(b % kBlocksPerQuad);
    store_x16_limbs(_mm512_permutex2var_epi32(q0, even, q1), quad.h_even + 16 * j, quad.l_even + 16 * j);
    store_x16_limbs(_mm512_permutex2var_epi32(q0, odd, q1), quad.h_odd + 16 * j, quad.l_odd + 16 * j);
    for (int l = 0; l < 4; ++l) quad.s[4 * j + l] = block.s;
    quad.neg_sums[4 * j] = x16_neg_limb_sums(block);
  }
  return bad == 0;
}

// The products of one quad with 16-bit activations (vnni::quad_rows' Act).
struct X16Act {
  using Quad = X16ActQuad;
  template <int MR>
  QJOULE_TARGET_AVX512_VNNI static void add(const vnni::QuadWeights& w, const X16ActQuad* xa, int64_t nq,
                                            __m512 (&acc)[MR]) {
    const __m512i zz = _mm512_or_si512(w.z, _mm512_slli_epi32(w.z, 24));  // words z and 256·z
    for (int i = 0; i < MR; ++i) {
      const X16ActQuad& a = xa[i * nq];
      __m512i tl = _mm512_madd_epi16(zz, _mm512_load_si512(a.neg_sums));  // −z·Σl − 256·z·Σh in lane 4j
      tl = _mm512_dpbusd_epi32(tl, _mm512_load_si512(a.l_odd), w.lo);
      tl = _mm512_dpbusd_epi32(tl, _mm512_load_si512(a.l_even), w.hi);
      __m512i th = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.lo, _mm512_load_si512(a.h_odd));
      th = _mm512_dpbusd_epi32(th, w.hi, _mm512_load_si512(a.h_even));
      const __m512i t = _mm512_add_epi32(tl, _mm512_slli_epi32(th, 8));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(w.dw, _mm512_load_ps(a.s)), acc[i]);
    }
  }
};

}  // namespace

template <class Block>
bool gemv_int4_x16_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                               float* y) {
  const int64_t K = w.padded_cols(), nb32 = K / kBlock, nq = vnni::quads_of(nb32);
  if (m <= 0 || w.rows <= 0) return true;
  thread_local std::vector<X16ActQuad> quads;  // reused: no allocation per decode step
  quads.resize(static_cast<std::size_t>(m * nq));
  for (int64_t i = 0; i < m; ++i) {
    if (!quantize_row_x16(x + i * K, nb32, quads.data() + i * nq)) return false;
  }
  vnni::run_quads<X16Act>(w, quads.data(), m, bias, y);
  return true;
}

#define QJOULE_INT4_X16_VNNI(BLOCK)                                                                            \
  template bool gemv_int4_x16_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, \
                                                 int64_t, float*);
QJOULE_INT4_X16_VNNI(quant::BlockInt4Sym<32>)
QJOULE_INT4_X16_VNNI(quant::BlockInt4Sym<64>)
QJOULE_INT4_X16_VNNI(quant::BlockInt4Sym<128>)
QJOULE_INT4_X16_VNNI(quant::BlockInt4Asym<32>)
QJOULE_INT4_X16_VNNI(quant::BlockInt4Asym<64>)
QJOULE_INT4_X16_VNNI(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_X16_VNNI

}  // namespace qjoule::kernels::detail

// int4 weights × INT8 activations (W4A8, "qjoule:avx512_vnni:int4_s8") on AVX512_VNNI: the arithmetic
// of gemm_int4_s8_avx2 (per 32-block the exact integer Σ (u − z)·q, scaled by d_w · d_x into FP32), with
// the 4-bit codes fed to vpdpbusd as they are stored (int4_quads_avx512_vnni.h: quads, loops). Per quad
// and activation row: −z·Σq into lane 4j by one vpmaddwd, two vpdpbusd (low nibbles × odd codes, high ×
// even), one conversion and one FMA by d_w · d_x. The u8 × s8 products sum in int32 exactly (4 · 15 · 127
// a lane and instruction), as in the AVX2 kernel; only the FP32 sums' order differs (four partial sums
// a block).
#include <vector>

#include "kernels/cpu/weight_only/avx512_vnni/int4_quads_avx512_vnni.h"
#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

using quant::BlockQ8Act;
using vnni::kBlocksPerQuad;

// Four q8 activation blocks in the order a weight quad's registers meet them.
struct alignas(64) Q8ActQuad {
  int8_t odd[64];        // lane j (16 bytes): codes 1, 3, .., 31 of block j (they meet the low nibbles)
  int8_t even[64];       // lane j: codes 0, 2, .., 30 of block j (the high nibbles)
  float d[16];           // lane l: d of block l / 4
  uint32_t neg_sum[16];  // lane 4j: −Σq of block j as a 16-bit word (|Σq| <= 32·127), zero-extended; others 0
};
static_assert(sizeof(Q8ActQuad) == 256);

// quads[q] of one row from its q8 blocks (nb32 of them); blocks past nb32 are zeros (they add nothing).
QJOULE_TARGET_AVX512_VNNI void to_quads(const BlockQ8Act* xq, int64_t nb32, Q8ActQuad* quads) {
  const int64_t nq = vnni::quads_of(nb32);
  std::memset(static_cast<void*>(quads), 0, sizeof(Q8ActQuad) * static_cast<std::size_t>(nq));
  // Per 128-bit lane: its 8 even codes, then its 8 odd ones; the 64-bit quarters then reordered so the
  // low half holds the 16 even codes and the high half the 16 odd ones.
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,  //
                                         0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int64_t b = 0; b < nb32; ++b) {
    Q8ActQuad& quad = quads[b / kBlocksPerQuad];
    const int j = static_cast<int>(b % kBlocksPerQuad);
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[b].qs));
    v = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xD8);  // quarters 0, 2, 1, 3
    _mm_store_si128(reinterpret_cast<__m128i*>(quad.even + 16 * j), _mm256_castsi256_si128(v));
    _mm_store_si128(reinterpret_cast<__m128i*>(quad.odd + 16 * j), _mm256_extracti128_si256(v, 1));
    for (int l = 0; l < 4; ++l) quad.d[4 * j + l] = xq[b].d;
    quad.neg_sum[4 * j] = static_cast<uint16_t>(-xq[b].sum);
  }
}

// The products of one quad with INT8 activations (vnni::quad_rows' Act).
struct Q8Act {
  using Quad = Q8ActQuad;
  template <int MR>
  QJOULE_TARGET_AVX512_VNNI static void add(const vnni::QuadWeights& w, const Q8ActQuad* xa, int64_t nq,
                                            __m512 (&acc)[MR]) {
    for (int i = 0; i < MR; ++i) {
      const Q8ActQuad& a = xa[i * nq];
      __m512i t = _mm512_madd_epi16(w.z, _mm512_load_si512(a.neg_sum));  // −z·Σq in lane 4j
      t = _mm512_dpbusd_epi32(t, w.lo, _mm512_load_si512(a.odd));
      t = _mm512_dpbusd_epi32(t, w.hi, _mm512_load_si512(a.even));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(w.dw, _mm512_load_ps(a.d)), acc[i]);
    }
  }
};

}  // namespace

template <class Block>
void gemm_int4_s8_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                              float* y, std::string_view layer) {
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = K / vnni::kBlock, nq = vnni::quads_of(nb32);
  if (m <= 0 || N <= 0) return;
  thread_local std::vector<BlockQ8Act> xq;  // reused: no allocation per decode step
  thread_local std::vector<Q8ActQuad> quads;
  xq.resize(static_cast<std::size_t>(m * nb32));
  quads.resize(static_cast<std::size_t>(m * nq));
  quantize_rows_q8_act_avx2(x, m, K, xq.data(), layer);
  for (int64_t i = 0; i < m; ++i) to_quads(xq.data() + i * nb32, nb32, quads.data() + i * nq);
  vnni::run_quads<Q8Act>(w, quads.data(), m, bias, y);
}

#define QJOULE_INT4_S8_VNNI(BLOCK)                                                                                     \
  template void gemm_int4_s8_avx512_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                                float*, std::string_view);
QJOULE_INT4_S8_VNNI(quant::BlockInt4Sym<32>)
QJOULE_INT4_S8_VNNI(quant::BlockInt4Sym<64>)
QJOULE_INT4_S8_VNNI(quant::BlockInt4Sym<128>)
QJOULE_INT4_S8_VNNI(quant::BlockInt4Asym<32>)
QJOULE_INT4_S8_VNNI(quant::BlockInt4Asym<64>)
QJOULE_INT4_S8_VNNI(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_S8_VNNI

}  // namespace qjoule::kernels::detail

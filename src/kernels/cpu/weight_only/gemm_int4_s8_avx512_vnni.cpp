// int4 weights × INT8 activations (W4A8, "qjoule:avx512_vnni:int4_s8") on AVX512_VNNI: the arithmetic
// of gemm_int4_s8_avx2 (per 32-block the exact integer Σ (u − z)·q, scaled by d_w · d_x into FP32),
// with the 4-bit codes fed to vpdpbusd as they are stored, never widened to 16 bits.
//
// A quad is four consecutive 32-blocks of a row (128 weights: 72 bytes for G = 32 sym). Per quad and
// weight row: one 64-byte register of codes (128-bit lane j: block j's 16 bytes), its low nibbles
// (elements 1, 3, .., 31 of each block: formats.h stores the first element of a pair in the high nibble)
// and high nibbles (elements 0, 2, .., 30) by one AND and one shift; two vpdpbusd against the activation
// codes laid out to match (Q8ActQuad, built once per product), so int32 lanes 4j..4j+3 hold block j's
// partial sums, started at −z·Σq (one vpmaddwd); the blocks' FP16 scales come out of one 64-byte load at
// the quad's start with one vpermw (every block size is even, so every scale is a whole word) and one
// vcvtph2ps; then one conversion and one FMA by d_w · d_x per quad. The u8 × s8 products sum in int32
// exactly (4 · 15 · 127 a lane and instruction), as in the AVX2 kernel; only the FP32 sums' order
// differs (four partial sums a block).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

#define QJOULE_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))

namespace qjoule::kernels::detail {
namespace {

using quant::BlockQ8Act;
using quant::kQ8ActBlockSize;

constexpr int64_t kBlocksPerQuad = 4;
constexpr int64_t kMaxRowsAtOnce = 4;     // activation rows that share one decode of a weight quad
constexpr int64_t kGemvRowsPerItem = 16;  // m <= 4: output rows per OpenMP work item (static schedule)
constexpr int64_t kGemmRowsPerItem = 64;  // m > 4: the item's rows stay in L2 while every activation row passes

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
  const int64_t nq = (nb32 + kBlocksPerQuad - 1) / kBlocksPerQuad;
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

// Where a quad's pieces sit, for BlockInt4Sym<G> / BlockInt4Asym<G>: S 32-blocks a group, 4 / S groups a quad.
template <class Block>
struct QuadLayout {
  static constexpr int kGroupBlocks = Block::kSize / kQ8ActBlockSize;  // S
  static constexpr int kBytes = static_cast<int>(sizeof(Block));
  static constexpr int kQsOffset = static_cast<int>(offsetof(Block, qs));
  static constexpr bool kAsym = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  static_assert(kBytes % 2 == 0 && (kBlocksPerQuad / kGroupBlocks) * kBytes >= 64,
                "a quad's scales are whole words within its first 64 bytes");
  // Byte offset of block j's codes from the quad's start.
  static constexpr int qs_offset(int j) { return (j / kGroupBlocks) * kBytes + kQsOffset + 16 * (j % kGroupBlocks); }
  // vpermw indices: word l (< 16) = the FP16 scale of block l / 4; for asym, dword l's low word = its
  // group's zero point word (z, then the reserved byte).
  static std::array<uint16_t, 32> scale_words() {
    std::array<uint16_t, 32> idx{};
    for (int l = 0; l < 16; ++l)
      idx[static_cast<std::size_t>(l)] = static_cast<uint16_t>((l / 4 / kGroupBlocks) * kBytes / 2);
    return idx;
  }
  static std::array<uint16_t, 32> zero_words() {
    std::array<uint16_t, 32> idx{};
    for (int l = 0; l < 32; ++l) {
      idx[static_cast<std::size_t>(l)] = static_cast<uint16_t>((l / 8 / kGroupBlocks) * kBytes / 2 + 1);
    }
    return idx;
  }
};

// The quad's codes: all four blocks, or the first `count` of a row's last, partial quad (others zero).
template <class Layout>
QJOULE_TARGET_AVX512_VNNI inline __m512i load_codes(const uint8_t* p) {
  if constexpr (Layout::kGroupBlocks == 4) {
    return _mm512_loadu_si512(p + Layout::qs_offset(0));
  } else if constexpr (Layout::kGroupBlocks == 2) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + Layout::qs_offset(0)));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + Layout::qs_offset(2)));
    return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1);
  } else {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + Layout::qs_offset(0))));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + Layout::qs_offset(1))), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + Layout::qs_offset(2))), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + Layout::qs_offset(3))), 3);
  }
}
template <class Layout>
QJOULE_TARGET_AVX512_VNNI inline __m512i load_codes_partial(const uint8_t* p, int count) {
  alignas(64) uint8_t codes[64] = {};
  for (int j = 0; j < count; ++j) std::memcpy(codes + 16 * j, p + Layout::qs_offset(j), 16);
  return _mm512_load_si512(codes);
}

// acc[i] += the quad's products with activation row i's quad (xa[i * nq]); head: the quad's first 64
// bytes (scales and zero points), codes: load_codes.
template <class Layout, int MR>
QJOULE_TARGET_AVX512_VNNI inline void add_quad(__m512i head, __m512i codes, const Q8ActQuad* xa, int64_t nq,
                                               __m512i scale_idx, __m512i zero_idx, __m512 (&acc)[MR]) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i lo = _mm512_and_si512(codes, low4);
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4);
  const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(scale_idx, head)));
  __m512i z;
  if constexpr (Layout::kAsym) {
    z = _mm512_and_si512(_mm512_permutexvar_epi16(zero_idx, head), _mm512_set1_epi32(0xFF));
  } else {
    z = _mm512_set1_epi32(quant::kInt4SymZero);
  }
  for (int i = 0; i < MR; ++i) {
    const Q8ActQuad& a = xa[i * nq];
    __m512i t = _mm512_madd_epi16(z, _mm512_load_si512(a.neg_sum));  // −z·Σq in lane 4j
    t = _mm512_dpbusd_epi32(t, lo, _mm512_load_si512(a.odd));
    t = _mm512_dpbusd_epi32(t, hi, _mm512_load_si512(a.even));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(dw, _mm512_load_ps(a.d)), acc[i]);
  }
}

// y[i, o] for i < MR activation rows (xa + i * nq), o in [o_begin, o_end).
template <class Block, int MR>
QJOULE_TARGET_AVX512_VNNI void int4_s8_rows(const quant::BlockMatrix<Block>& w, const Q8ActQuad* xa, const float* bias,
                                            float* y, int64_t o_begin, int64_t o_end) {
  using Layout = QuadLayout<Block>;
  constexpr int64_t kQuadBytes = (kBlocksPerQuad / Layout::kGroupBlocks) * Layout::kBytes;
  const int64_t N = w.rows, nb32 = w.padded_cols() / kQ8ActBlockSize;
  const int64_t full = nb32 / kBlocksPerQuad, nq = (nb32 + kBlocksPerQuad - 1) / kBlocksPerQuad;
  const int rest = static_cast<int>(nb32 % kBlocksPerQuad);
  const auto scale_words = Layout::scale_words();
  const auto zero_words = Layout::zero_words();
  const __m512i scale_idx = _mm512_loadu_si512(scale_words.data());
  const __m512i zero_idx = _mm512_loadu_si512(zero_words.data());
  for (int64_t o = o_begin; o < o_end; ++o) {
    const auto* row = reinterpret_cast<const uint8_t*>(w.row(o));
    __m512 acc[2][MR];  // two chains: consecutive quads' FMAs do not wait for each other
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < MR; ++i) acc[c][i] = _mm512_setzero_ps();
    int64_t q = 0;
    for (; q + 2 <= full; q += 2) {
      const uint8_t* p = row + q * kQuadBytes;
      add_quad<Layout, MR>(_mm512_loadu_si512(p), load_codes<Layout>(p), xa + q, nq, scale_idx, zero_idx, acc[0]);
      p += kQuadBytes;
      add_quad<Layout, MR>(_mm512_loadu_si512(p), load_codes<Layout>(p), xa + q + 1, nq, scale_idx, zero_idx, acc[1]);
    }
    if (q < full) {
      const uint8_t* p = row + q * kQuadBytes;
      add_quad<Layout, MR>(_mm512_loadu_si512(p), load_codes<Layout>(p), xa + q, nq, scale_idx, zero_idx, acc[0]);
    }
    if (rest > 0) {  // the row's last `rest` blocks (whole groups): loads that stay inside the row
      const uint8_t* p = row + full * kQuadBytes;
      const int64_t bytes = (rest / Layout::kGroupBlocks) * Layout::kBytes;
      const __m512i head = _mm512_maskz_loadu_epi8(_cvtu64_mask64(~uint64_t{0} >> (64 - bytes)), p);
      add_quad<Layout, MR>(head, load_codes_partial<Layout>(p, rest), xa + full, nq, scale_idx, zero_idx, acc[1]);
    }
    for (int i = 0; i < MR; ++i) {
      y[i * N + o] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][i], acc[1][i])) + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template <class Block>
QJOULE_TARGET_AVX512_VNNI void int4_s8_rows_dispatch(int64_t mr, const quant::BlockMatrix<Block>& w,
                                                     const Q8ActQuad* xa, const float* bias, float* y, int64_t o_begin,
                                                     int64_t o_end) {
  switch (mr) {
    case 1: int4_s8_rows<Block, 1>(w, xa, bias, y, o_begin, o_end); break;
    case 2: int4_s8_rows<Block, 2>(w, xa, bias, y, o_begin, o_end); break;
    case 3: int4_s8_rows<Block, 3>(w, xa, bias, y, o_begin, o_end); break;
    default: int4_s8_rows<Block, 4>(w, xa, bias, y, o_begin, o_end); break;
  }
}

}  // namespace

template <class Block>
void gemm_int4_s8_avx512_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                              float* y, std::string_view layer) {
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = K / kQ8ActBlockSize;
  const int64_t nq = (nb32 + kBlocksPerQuad - 1) / kBlocksPerQuad;
  if (m <= 0 || N <= 0) return;
  thread_local std::vector<BlockQ8Act> xq;  // reused: no allocation per decode step
  thread_local std::vector<Q8ActQuad> quads;
  xq.resize(static_cast<std::size_t>(m * nb32));
  quads.resize(static_cast<std::size_t>(m * nq));
  quantize_rows_q8_act_avx2(x, m, K, xq.data(), layer);
  for (int64_t i = 0; i < m; ++i) to_quads(xq.data() + i * nb32, nb32, quads.data() + i * nq);
  const Q8ActQuad* xa = quads.data();
  if (m <= kMaxRowsAtOnce) {
    const int64_t items = (N + kGemvRowsPerItem - 1) / kGemvRowsPerItem;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < items; ++c) {
      const int64_t o_begin = c * kGemvRowsPerItem;
      int4_s8_rows_dispatch(m, w, xa, bias, y, o_begin, std::min(N, o_begin + kGemvRowsPerItem));
    }
    return;
  }
  const int64_t items = (N + kGemmRowsPerItem - 1) / kGemmRowsPerItem;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < items; ++c) {
    const int64_t o_begin = c * kGemmRowsPerItem, o_end = std::min(N, o_begin + kGemmRowsPerItem);
    for (int64_t i0 = 0; i0 < m; i0 += kMaxRowsAtOnce) {
      int4_s8_rows_dispatch(std::min(kMaxRowsAtOnce, m - i0), w, xa + i0 * nq, bias, y + i0 * N, o_begin, o_end);
    }
  }
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

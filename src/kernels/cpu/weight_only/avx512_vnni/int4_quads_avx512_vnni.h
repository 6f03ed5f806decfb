// What qjoule's AVX512_VNNI int4 kernels share (gemm_int4_s8_avx512_vnni.cpp: INT8 activations,
// gemv_int4_x16_avx512_vnni.cpp: 16-bit activations in two INT8 limbs): the weights read in quads and
// the loops over rows.
//
// A quad is four consecutive 32-blocks of a row (128 weights: 72 bytes for G = 32 sym). Per quad and
// weight row: one 64-byte register of codes (128-bit lane j: block j's 16 bytes), its low nibbles
// (elements 1, 3, .., 31 of each block: formats.h stores the first element of a pair in the high nibble)
// and high nibbles (elements 0, 2, .., 30) by one AND and one shift, fed to vpdpbusd as they are, never
// widened; the activations are laid out once per product to match (lane j of an activation register:
// block j's odd or even elements), so int32 lanes 4j..4j+3 hold block j's partial sums. The blocks' FP16
// scales come out of one 64-byte load at the quad's start with one vpermw (every block size is even, so
// every scale is a whole word) and one vcvtph2ps; asym zero points with one vpermw from the same load.
// Included only by those two files.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "qjoule/quant/formats.h"

#define QJOULE_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c")))

namespace qjoule::kernels::detail::vnni {

constexpr int64_t kBlock = 32;  // weights a block (the activation block too)
constexpr int64_t kBlocksPerQuad = 4;
constexpr int64_t kMaxRowsAtOnce = 4;     // activation rows that share one decode of a weight quad
constexpr int64_t kGemvRowsPerItem = 16;  // m <= 4: output rows per OpenMP work item (static schedule)
constexpr int64_t kGemmRowsPerItem = 64;  // m > 4: the item's rows stay in L2 while every activation row passes

inline int64_t quads_of(int64_t blocks) { return (blocks + kBlocksPerQuad - 1) / kBlocksPerQuad; }

// Where a quad's pieces sit, for BlockInt4Sym<G> / BlockInt4Asym<G>: S 32-blocks a group, 4 / S groups a quad.
template <class Block>
struct QuadLayout {
  static constexpr int kGroupBlocks = Block::kSize / static_cast<int>(kBlock);  // S
  static constexpr int kBytes = static_cast<int>(sizeof(Block));
  static constexpr int kQsOffset = static_cast<int>(offsetof(Block, qs));
  static constexpr int64_t kQuadBytes = (kBlocksPerQuad / kGroupBlocks) * kBytes;
  static constexpr bool kAsym = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;
  static_assert(kBytes % 2 == 0 && kQuadBytes >= 64, "a quad's scales are whole words within its first 64 bytes");
  // Byte offset of block j's codes from the quad's start.
  static constexpr int qs_offset(int j) { return (j / kGroupBlocks) * kBytes + kQsOffset + 16 * (j % kGroupBlocks); }
  // vpermw indices: word l (< 16) = the FP16 scale of block l / 4; for asym, both words of dword l = its
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

// One quad of one weight row, unpacked: u = code (0..15) per byte, d_w per int32 lane, z per int32 lane.
struct QuadWeights {
  __m512i lo, hi;  // low nibbles (odd elements), high nibbles (even elements)
  __m512 dw;       // lane l: the FP16 scale of block l / 4
  __m512i z;       // lane l: the zero point of block l / 4 (sym: 8)
};

template <class Layout>
QJOULE_TARGET_AVX512_VNNI inline QuadWeights unpack_quad(__m512i head, __m512i codes, __m512i scale_idx,
                                                         __m512i zero_idx) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  QuadWeights q;
  q.lo = _mm512_and_si512(codes, low4);
  q.hi = _mm512_and_si512(_mm512_srli_epi16(codes, 4), low4);
  q.dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(scale_idx, head)));
  if constexpr (Layout::kAsym) {
    q.z = _mm512_and_si512(_mm512_permutexvar_epi16(zero_idx, head), _mm512_set1_epi32(0xFF));
  } else {
    q.z = _mm512_set1_epi32(quant::kInt4SymZero);
  }
  return q;
}

// y[i, o] for i < MR activation rows (row i's quads at xa + i * nq), o in [o_begin, o_end).
// Act::add<MR>(const QuadWeights&, const typename Act::Quad* xa, int64_t nq, __m512 (&acc)[MR]) adds one
// quad's products to the rows' FP32 accumulators.
template <class Act, class Block, int MR>
QJOULE_TARGET_AVX512_VNNI void quad_rows(const quant::BlockMatrix<Block>& w, const typename Act::Quad* xa,
                                         const float* bias, float* y, int64_t o_begin, int64_t o_end) {
  using Layout = QuadLayout<Block>;
  const int64_t N = w.rows, nb32 = w.padded_cols() / kBlock;
  const int64_t full = nb32 / kBlocksPerQuad, nq = quads_of(nb32);
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
    const auto add_full_quad = [&](int64_t q, __m512(&chain)[MR]) QJOULE_TARGET_AVX512_VNNI {
      const uint8_t* p = row + q * Layout::kQuadBytes;
      const QuadWeights wq = unpack_quad<Layout>(_mm512_loadu_si512(p), load_codes<Layout>(p), scale_idx, zero_idx);
      Act::template add<MR>(wq, xa + q, nq, chain);
    };
    int64_t q = 0;
    for (; q + 2 <= full; q += 2) {
      add_full_quad(q, acc[0]);
      add_full_quad(q + 1, acc[1]);
    }
    if (q < full) add_full_quad(q, acc[0]);
    if (rest > 0) {  // the row's last `rest` blocks (whole groups): loads that stay inside the row
      const uint8_t* p = row + full * Layout::kQuadBytes;
      const int64_t bytes = (rest / Layout::kGroupBlocks) * Layout::kBytes;
      const __m512i head = _mm512_maskz_loadu_epi8(_cvtu64_mask64(~uint64_t{0} >> (64 - bytes)), p);
      const QuadWeights wq = unpack_quad<Layout>(head, load_codes_partial<Layout>(p, rest), scale_idx, zero_idx);
      Act::template add<MR>(wq, xa + full, nq, acc[1]);
    }
    for (int i = 0; i < MR; ++i) {
      y[i * N + o] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][i], acc[1][i])) + (bias != nullptr ? bias[o] : 0.0f);
    }
  }
}

template <class Act, class Block>
QJOULE_TARGET_AVX512_VNNI void quad_rows_dispatch(int64_t mr, const quant::BlockMatrix<Block>& w,
                                                  const typename Act::Quad* xa, const float* bias, float* y,
                                                  int64_t o_begin, int64_t o_end) {
  switch (mr) {
    case 1: quad_rows<Act, Block, 1>(w, xa, bias, y, o_begin, o_end); break;
    case 2: quad_rows<Act, Block, 2>(w, xa, bias, y, o_begin, o_end); break;
    case 3: quad_rows<Act, Block, 3>(w, xa, bias, y, o_begin, o_end); break;
    default: quad_rows<Act, Block, 4>(w, xa, bias, y, o_begin, o_end); break;
  }
}

// y = x · Wᵀ + bias for m activation rows laid out in quads (row i at xa + i * nq), on the OpenMP
// threads: m <= 4 as one GEMV over the output rows (static schedule), larger m four rows per pass over
// items of kGemmRowsPerItem weight rows.
template <class Act, class Block>
void run_quads(const quant::BlockMatrix<Block>& w, const typename Act::Quad* xa, int64_t m, const float* bias,
               float* y) {
  const int64_t N = w.rows, nq = quads_of(w.padded_cols() / kBlock);
  if (m <= kMaxRowsAtOnce) {
    const int64_t items = (N + kGemvRowsPerItem - 1) / kGemvRowsPerItem;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < items; ++c) {
      const int64_t o_begin = c * kGemvRowsPerItem;
      quad_rows_dispatch<Act>(m, w, xa, bias, y, o_begin, std::min(N, o_begin + kGemvRowsPerItem));
    }
    return;
  }
  const int64_t items = (N + kGemmRowsPerItem - 1) / kGemmRowsPerItem;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < items; ++c) {
    const int64_t o_begin = c * kGemmRowsPerItem, o_end = std::min(N, o_begin + kGemmRowsPerItem);
    for (int64_t i0 = 0; i0 < m; i0 += kMaxRowsAtOnce) {
      quad_rows_dispatch<Act>(std::min(kMaxRowsAtOnce, m - i0), w, xa + i0 * nq, bias, y + i0 * N, o_begin, o_end);
    }
  }
}

}  // namespace qjoule::kernels::detail::vnni

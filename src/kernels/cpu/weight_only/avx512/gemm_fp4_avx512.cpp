// AVX-512 decoders of the FP4 formats (mxfp4: 4 blocks of 32 a 128-weight chunk, nvfp4: 8 blocks of 16;
// layouts: qjoule/quant/formats.h) and their entry points, on the loops every 4-bit format shares
// (weight_only_avx512.h, weight_only_gemv_x16_avx512.h). The E2M1 table takes the place of NF4's; a lane's
// scale is its block's (fp4_scales.h). On the x16 GEMV the table is 2·E2M1, exact integers.
#include <type_traits>

#include "kernels/cpu/weight_only/avx512/fp4_scale_lanes_avx512.h"
#include "kernels/cpu/weight_only/avx512/nibble_blocks_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_x16_avx512.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::kernels::detail {
namespace {

// A vpshufb control dword: byte i of its 128-bit lane, zero-extended (0xFF bytes write 0).
constexpr int byte_at(int i) { return static_cast<int>(0xFFFFFF00u | static_cast<unsigned>(i)); }

// Where byte k of a chunk's 64 bytes of nibbles lies among its blocks' bytes: block k / (G / 2), after its scale.
template <class Block>
struct CodeBytes {
  alignas(64) uint8_t at[64];
  constexpr CodeBytes() : at{} {
    for (int k = 0; k < 64; ++k)
      at[k] =
          static_cast<uint8_t>(k / (Block::kSize / 2) * static_cast<int>(sizeof(Block)) + 1 + k % (Block::kSize / 2));
  }
};

// The chunk's 64 bytes of nibbles with one vpermt2b (AVX512_VBMI) over its blocks' 68 (MXFP4) or 72 (NVFP4)
// bytes: the first 64 loaded whole, the rest masked (nothing past the row is read). gather_codes takes 4 or 8
// loads and inserts (NVFP4's through the stack, whose 8-byte stores a 64-byte load cannot forward). In asm, so
// that the loop around it keeps its own target: the caller runs it only where fp4_codes_by_vbmi() said so.
template <class Block>
QJOULE_TARGET_AVX512 inline __m512i gather_codes_vbmi(const Block* b) {
  static constexpr CodeBytes<Block> kAt{};
  constexpr int rest = 128 / Block::kSize * static_cast<int>(sizeof(Block)) - 64;  // 4 or 8
  __m512i lo = _mm512_loadu_si512(b);
  const __m512i hi = _mm512_maskz_loadu_epi8((__mmask64{1} << rest) - 1, reinterpret_cast<const char*>(b) + 64);
  const __m512i at = _mm512_load_si512(kAt.at);
  __asm__("vpermt2b %[hi], %[at], %[lo]" : [lo] "+v"(lo) : [at] "v"(at), [hi] "v"(hi));
  return lo;
}

template <class Packed, bool Vbmi>
struct Fp4Decoder {
  using Block = std::remove_cv_t<std::remove_reference_t<decltype(*std::declval<Packed>().blocks.data())>>;
  static constexpr bool kNibbles = true;
  static constexpr bool kHasZero = false;
  static constexpr float kX16TableScale = avx512::kE2M1X16TableScale;
  static constexpr int kCount = static_cast<int>(avx512::kChunk) / Block::kSize;  // blocks per chunk
  const Packed& w;
  int64_t rows() const { return w.rows; }
  int64_t cols() const { return w.padded_cols(); }
  QJOULE_TARGET_AVX512 __m512 table() const { return _mm512_loadu_ps(quant::kE2M1Table.data()); }
  struct Row : Fp4RowCursor<Block> {
    using Fp4RowCursor<Block>::blocks;
    using Fp4RowCursor<Block>::tensor_scale;
    QJOULE_TARGET_AVX512 void chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const {
      const Block* b = blocks + c * kCount;
      if constexpr (Vbmi) {
        codes = gather_codes_vbmi(b);
      } else {
        codes = gather_codes(b);
      }
      if constexpr (std::is_same_v<Block, quant::BlockNvfp4>) {
        d = nvfp4_lane_scales(b);
      } else {
        d = mxfp4_lane_scales(b);
      }
      z = _mm512_setzero_ps();
    }
    // MXFP4: the 4 blocks' E8M0 scales in the lanes of their weights: block L's byte is byte 17L of the chunk,
    // byte L of 128-bit lane L, whose 4 dword lanes hold block L's weights (one vpshufb); decoded by e8m0_lanes.
    QJOULE_TARGET_AVX512 __m512 mxfp4_lane_scales(const Block* b) const {
      const __m512i pick = _mm512_set_epi32(byte_at(3), byte_at(3), byte_at(3), byte_at(3), byte_at(2), byte_at(2),
                                            byte_at(2), byte_at(2), byte_at(1), byte_at(1), byte_at(1), byte_at(1),
                                            byte_at(0), byte_at(0), byte_at(0), byte_at(0));
      return e8m0_lanes(_mm512_shuffle_epi8(_mm512_loadu_si512(b), pick));
    }
    // NVFP4: the 8 blocks' E4M3 scales in the lanes of their weights without 8 scalar lookups. The scale
    // bytes lie at bytes 9j of the chunk's first 64 (a block is 9 bytes): 128-bit lane L holds blocks 2L and
    // 2L + 1's at its bytes 2L and 2L + 9, so one vpshufb spreads them over its dword lanes 4L .. 4L + 3;
    // decoded by e4m3_lanes, times the tensor's scale, as scale_of.
    QJOULE_TARGET_AVX512 __m512 nvfp4_lane_scales(const Block* b) const {
      const __m512i raw = _mm512_loadu_si512(b);
      // Dword lane 4L + i takes byte 2L (i < 2) or 2L + 9 of its 128-bit lane.
      const __m512i pick = _mm512_set_epi32(byte_at(15), byte_at(15), byte_at(6), byte_at(6), byte_at(13), byte_at(13),
                                            byte_at(4), byte_at(4),  // lanes 3, 2
                                            byte_at(11), byte_at(11), byte_at(2), byte_at(2), byte_at(9), byte_at(9),
                                            byte_at(0), byte_at(0));  // lanes 1, 0
      return _mm512_mul_ps(e4m3_lanes(_mm512_shuffle_epi8(raw, pick)), _mm512_set1_ps(tensor_scale));
    }
  };
  Row row(int64_t o) const { return Row{fp4_row_cursor(w, o)}; }
};

// f(decoder): the VBMI decoder where fp4_codes_by_vbmi() allows it.
template <class Packed, class F>
auto with_fp4_decoder(const Packed& w, F f) {
  return fp4_codes_by_vbmi() ? f(Fp4Decoder<Packed, true>{w}) : f(Fp4Decoder<Packed, false>{w});
}

}  // namespace

template <class Packed>
void gemm_fp4_avx512(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  with_fp4_decoder(w, [&](const auto& dec) {
    avx512::run_gemm<false>(dec, bias, x, m, y, [&] { gemm_fp4_f32_avx2(w, bias, x, m, y); });
  });
}
template <class Packed>
void gemm_fp4_avx512_bf16(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  with_fp4_decoder(w, [&](const auto& dec) { avx512::run_gemm<true>(dec, bias, x, m, y, [] {}); });
}
template <class Packed>
void gemm_fp4_avx512_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows ||
      !with_fp4_decoder(w, [&](const auto& dec) { return avx512::run_gemv_x16(dec, bias, x, m, y); }))
    gemm_fp4_avx512(w, bias, x, m, y);
}
template <class Packed>
void gemm_fp4_avx512_bf16_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows ||
      !with_fp4_decoder(w, [&](const auto& dec) { return avx512::run_gemv_x16(dec, bias, x, m, y); }))
    gemm_fp4_avx512_bf16(w, bias, x, m, y);
}

#define QJOULE_FP4_AVX512(PACKED)                                                                         \
  template void gemm_fp4_avx512<PACKED>(const PACKED&, const float*, const float*, int64_t, float*);      \
  template void gemm_fp4_avx512_bf16<PACKED>(const PACKED&, const float*, const float*, int64_t, float*); \
  template void gemm_fp4_avx512_vnni<PACKED>(const PACKED&, const float*, const float*, int64_t, float*); \
  template void gemm_fp4_avx512_bf16_vnni<PACKED>(const PACKED&, const float*, const float*, int64_t, float*);
QJOULE_FP4_AVX512(quant::Mxfp4Matrix)
QJOULE_FP4_AVX512(quant::Nvfp4Matrix)
#undef QJOULE_FP4_AVX512

}  // namespace qjoule::kernels::detail

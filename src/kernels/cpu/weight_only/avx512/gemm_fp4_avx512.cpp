// AVX-512 decoders of the FP4 formats (mxfp4: 4 blocks of 32 a 128-weight chunk, nvfp4: 8 blocks of 16;
// layouts: qjoule/quant/formats.h) and their entry points, on the loops every 4-bit format shares
// (weight_only_avx512.h, weight_only_gemv_x16_avx512.h). The E2M1 table takes the place of NF4's; a lane's
// scale is its block's (fp4_scales.h). On the x16 GEMV the table is 2·E2M1, exact integers.
#include "kernels/cpu/weight_only/avx512/nibble_blocks_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_avx512.h"
#include "kernels/cpu/weight_only/avx512/weight_only_gemv_x16_avx512.h"
#include "kernels/cpu/weight_only/fp4_scales.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"

namespace qjoule::kernels::detail {
namespace {

template <class Packed>
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
  struct Row {
    const Block* blocks;
    float tensor_scale;
    QJOULE_TARGET_AVX512 void chunk(int64_t c, __m512i& codes, __m512& d, __m512& z) const {
      const Block* b = blocks + c * kCount;
      codes = gather_codes(b);
      float s[kCount];
      for (int j = 0; j < kCount; ++j) s[j] = fp4_block_scale(b[j], tensor_scale);
      d = per_block_lanes<kCount>(s);
      z = _mm512_setzero_ps();
    }
    float at(int64_t k) const {
      const Block& b = blocks[k / Block::kSize];
      const int i = static_cast<int>(k % Block::kSize);
      const int u = (i % 2 == 0) ? (b.qs[i / 2] >> 4) : (b.qs[i / 2] & 0x0F);
      return quant::kE2M1Table[static_cast<std::size_t>(u)] * fp4_block_scale(b, tensor_scale);
    }
  };
  Row row(int64_t o) const { return Row{w.row(o), fp4_tensor_scale(w)}; }
};

}  // namespace

template <class Packed>
void gemm_fp4_avx512(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<false>(Fp4Decoder<Packed>{w}, bias, x, m, y, [&] { gemm_fp4_f32_avx2(w, bias, x, m, y); });
}
template <class Packed>
void gemm_fp4_avx512_bf16(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  avx512::run_gemm<true>(Fp4Decoder<Packed>{w}, bias, x, m, y, [] {});
}
template <class Packed>
void gemm_fp4_avx512_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Fp4Decoder<Packed>{w}, bias, x, m, y))
    gemm_fp4_avx512(w, bias, x, m, y);
}
template <class Packed>
void gemm_fp4_avx512_bf16_vnni(const Packed& w, const float* bias, const float* x, int64_t m, float* y) {
  if (m > avx512::kGemvMaxRows || !avx512::run_gemv_x16(Fp4Decoder<Packed>{w}, bias, x, m, y))
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

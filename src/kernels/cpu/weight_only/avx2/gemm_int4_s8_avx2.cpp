// int4 weights × INT8 activations (W4A8): activations are quantized per row in blocks of 32
// (quant::BlockQ8Act, bit-identical to quant::quantize_row_q8_act_ref); for each 32-block the 32
// unsigned weight nibbles u (unpacked in registers) and the 32 signed activation codes q meet in
// vpmaddubsw (u8 × s8 → pairs summed in s16: at most 2·15·127, no saturation) and vpmaddwd (→ s32), or in one
// vpdpbusd where the CPU has AVX-VNNI (the VEX form: Alder Lake and later client cores, Sierra Forest): the same
// s32 sums of four products, so both give the same bits; the zero point comes off in integers
// (Σ (u − z)·q = Σ u·q − z·Σ q), and the exact block sum is scaled by d_w · d_x into an FP32 accumulator.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/weight_only/quantize_rows_q8_act.h"
#include "kernels/cpu/weight_only/avx2/weight_only_avx2.h"
#include "kernels/cpu/weight_only/weight_only_gemm.h"
#include "qjoule/quant/quantize_activations_q8.h"

namespace qjoule::kernels::detail {
namespace {

using quant::BlockQ8Act;
using quant::kQ8ActBlockSize;

template <class Block>
int zero_point(const Block& b) {
  if constexpr (std::is_same_v<Block, quant::BlockInt4Sym<Block::kSize>>) {
    return quant::kInt4SymZero;
  } else {
    return b.zero;
  }
}

// The s32 sums of four u8 × s8 products, one namespace an instruction: vpmaddubsw + vpmaddwd on AVX2, one
// vpdpbusd on AVX-VNNI, and the EVEX form of AVX512_VNNI + VL, which runs the AVX-VNNI kernel's code on CPUs
// without AVX-VNNI (test_int4_s8_avx_vnni).
namespace dot_avx2 {
#define QJOULE_S8_TARGET QJOULE_TARGET_AVX2
QJOULE_TARGET_AVX2 __attribute__((always_inline)) inline __m256i dot4(__m256i u, __m256i q) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), _mm256_set1_epi16(1));
}
#include "kernels/cpu/weight_only/avx2/int4_s8_rows.inc"
#undef QJOULE_S8_TARGET
}  // namespace dot_avx2

namespace dot_avx_vnni {
#define QJOULE_S8_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
QJOULE_S8_TARGET __attribute__((always_inline)) inline __m256i dot4(__m256i u, __m256i q) {
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, q);
}
#include "kernels/cpu/weight_only/avx2/int4_s8_rows.inc"
#undef QJOULE_S8_TARGET
}  // namespace dot_avx_vnni

namespace dot_avx512vl_vnni {
#define QJOULE_S8_TARGET __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))
QJOULE_S8_TARGET __attribute__((always_inline)) inline __m256i dot4(__m256i u, __m256i q) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, q);
}
#include "kernels/cpu/weight_only/avx2/int4_s8_rows.inc"
#undef QJOULE_S8_TARGET
}  // namespace dot_avx512vl_vnni

template <class Block>
using RowsFn = void (*)(int64_t, const quant::BlockMatrix<Block>&, const BlockQ8Act*, const float*, float*, int64_t,
                        int64_t);

template <class Block>
void run_int4_s8(RowsFn<Block> rows, const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m,
                 float* y, std::string_view layer) {
  const int64_t N = w.rows, K = w.padded_cols(), nb32 = K / kQ8ActBlockSize;
  if (m <= 0 || N <= 0) return;
  std::vector<BlockQ8Act> xq(static_cast<std::size_t>(m * nb32));
  quantize_rows_q8_act_avx2(x, m, K, xq.data(), layer);
  // Weight rows per work item: the chunk's packed rows stay in L1/L2 while every activation row passes.
  const int64_t chunk = m <= avx2::kDirectMaxRows ? 16 : 64;
  const int64_t chunks = (N + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o_begin = c * chunk, o_end = std::min(N, o_begin + chunk);
    for (int64_t i0 = 0; i0 < m; i0 += avx2::kMr) {
      rows(std::min<int64_t>(avx2::kMr, m - i0), w, xq.data() + i0 * nb32, bias, y + i0 * N, o_begin, o_end);
    }
  }
}

}  // namespace

template <class Block>
void gemm_int4_s8_avx2(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                       std::string_view layer) {
  run_int4_s8<Block>(&dot_avx2::rows<Block>, w, bias, x, m, y, layer);
}

template <class Block>
void gemm_int4_s8_avx_vnni(const quant::BlockMatrix<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                           std::string_view layer) {
  run_int4_s8<Block>(&dot_avx_vnni::rows<Block>, w, bias, x, m, y, layer);
}

template <class Block>
void gemm_int4_s8_avx512vl_vnni_for_test(const quant::BlockMatrix<Block>& w, const float* bias, const float* x,
                                         int64_t m, float* y, std::string_view layer) {
  run_int4_s8<Block>(&dot_avx512vl_vnni::rows<Block>, w, bias, x, m, y, layer);
}

bool cpu_supports_avx_vnni() {
  // The target's every extension: the FP16 scales convert by F16C.
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avxvnni");
  return has;
}

#define QJOULE_INT4_S8_AVX2(BLOCK)                                                                                  \
  template void gemm_int4_s8_avx2<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t,     \
                                         float*, std::string_view);                                                 \
  template void gemm_int4_s8_avx_vnni<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*, const float*, int64_t, \
                                             float*, std::string_view);                                             \
  template void gemm_int4_s8_avx512vl_vnni_for_test<BLOCK>(const quant::BlockMatrix<BLOCK>&, const float*,          \
                                                           const float*, int64_t, float*, std::string_view);
QJOULE_INT4_S8_AVX2(quant::BlockInt4Sym<32>)
QJOULE_INT4_S8_AVX2(quant::BlockInt4Sym<64>)
QJOULE_INT4_S8_AVX2(quant::BlockInt4Sym<128>)
QJOULE_INT4_S8_AVX2(quant::BlockInt4Asym<32>)
QJOULE_INT4_S8_AVX2(quant::BlockInt4Asym<64>)
QJOULE_INT4_S8_AVX2(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_S8_AVX2

}  // namespace qjoule::kernels::detail

// The FP4 formats' block scales as the kernels read them (formats.h, "mxfp4 / nvfp4"): one FP32 value per
// stored scale byte, from a 256-entry table built once from the scalar references (quant::e8m0_value,
// quant::e4m3_value), so that the AVX2 kernels and the tails scale by exactly what dequantize_row_*_ref does
// (the AVX-512 decoders decode a chunk's scale bytes in vectors to the same values, gemm_fp4_avx512.cpp). NVFP4's
// kernels multiply by s_b · s_t (the tensor's scale folded into the block's: one FP32 rounding that
// the reference, (E2M1 · s_b) · s_t, does not make; within every kernel's error budget).
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

const std::array<float, 256>& e8m0_values();  // 2^(b − 127); NaN for 255
const std::array<float, 256>& e4m3_values();  // E4M3FN; NaN for 0x7F and 0xFF

// The stored scale byte of a block, and the table that decodes it for a matrix of such blocks: a kernel
// takes the table once per row (a call inside its loop would spill its vector registers) and reads block b's
// scale as table[scale_code(b)] · tensor scale.
inline uint8_t fp4_scale_code(const quant::BlockMxfp4& b) { return b.scale_e8m0; }
inline uint8_t fp4_scale_code(const quant::BlockNvfp4& b) { return b.scale_e4m3; }
inline const float* fp4_scale_table(const quant::Mxfp4Matrix&) { return e8m0_values().data(); }
inline const float* fp4_scale_table(const quant::Nvfp4Matrix&) { return e4m3_values().data(); }

// The tensor's scale of a packed FP4 matrix (1 for MXFP4, which has none: a product by 1 is exact).
inline float fp4_tensor_scale(const quant::Mxfp4Matrix&) { return 1.0f; }
inline float fp4_tensor_scale(const quant::Nvfp4Matrix& w) { return w.tensor_scale; }

// A row cursor of a packed FP4 matrix, as every FP4 decoder's Row starts: its blocks, the scale table, the
// tensor's scale, a block's scale and one weight (the kernels' tails: W[o, k]).
template <class Block>
struct Fp4RowCursor {
  const Block* blocks;
  const float* scales;  // fp4_scale_table
  float tensor_scale;
  float scale_of(const Block& b) const { return scales[fp4_scale_code(b)] * tensor_scale; }
  float at(int64_t k) const {
    const Block& b = blocks[k / Block::kSize];
    const int i = static_cast<int>(k % Block::kSize);
    const int u = (i % 2 == 0) ? (b.qs[i / 2] >> 4) : (b.qs[i / 2] & 0x0F);
    return quant::kE2M1Table[static_cast<std::size_t>(u)] * scale_of(b);
  }
};

template <class Packed>
auto fp4_row_cursor(const Packed& w, int64_t o) {
  using Block = std::remove_cv_t<std::remove_reference_t<decltype(*w.row(o))>>;
  return Fp4RowCursor<Block>{w.row(o), fp4_scale_table(w), fp4_tensor_scale(w)};
}

}  // namespace qjoule::kernels::detail

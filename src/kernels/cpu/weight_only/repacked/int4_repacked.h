// int4 weights repacked at load for the decode GEMV that reads them ("..._repacked" kernel paths): the
// bytes of a quant::BlockMatrix<BlockInt4Sym<G>> / <BlockInt4Asym<G>> (formats.h), permuted, nothing
// rounded again: the same codes, scales and zero points, so the numerics are formats.h's int4 and the
// matrix unpacks back bit for bit (unpack_int4_repacked).
//
// Layout: the rows in panels of 16 (the last panel padded with zero rows: codes 0, scale 0), each panel
// one contiguous record starting on a 64-byte boundary:
//   codes  [nb32][4][16][4] bytes: per 32-block b of the row (b = 0 .. padded_cols / 32), four 64-byte
//          registers j = 0..3; in register j, the four bytes of int32 lane r (the panel's row r) hold
//          elements 32b + 8j + t (t = 0..3) in their low nibbles and 32b + 8j + 4 + t in their high ones.
//          One AND (low) or one shift and AND (high) gives the bytes vpdpbusd multiplies with four
//          consecutive activations broadcast to every lane: sixteen rows' dot products a register, no
//          horizontal sums.
//   scales [groups][16] FP16 bits: the group's `d` of rows 0..15.
//   zeros  (asym only) [groups][16] bytes `zero`, then [16] bytes `reserved` (kept for the round trip).
//   then zero bytes up to the next multiple of 64 (the panel stride).
// bytes() is the format's size (rows · groups · sizeof(Block)), what the record's model bytes count; the
// padding rows and bytes (fewer than 16 rows, 63 bytes a panel) are not counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

constexpr int64_t kRepackedRows = 16;         // rows of a panel: int32 lanes of a 512-bit register
constexpr int64_t kRepackedBlock = 32;        // weights of a 32-block (the q8 activation block)
constexpr int64_t kRepackedBlockBytes = 256;  // a 32-block of a panel: 16 rows × 16 bytes of nibbles

// Byte offset, within a panel's codes, of the byte holding element e (0..31) of 32-block b of the panel's
// row r, and whether e sits in its high nibble (the codes' order above; the FP4 panels share it).
struct RepackedNibble {
  int64_t byte;
  bool high;
};
inline RepackedNibble repacked_nibble_at(int64_t b, int64_t r, int e) {
  const int j = e / 8, t = e % 8 % 4;
  return {b * kRepackedBlockBytes + j * 64 + r * 4 + t, e % 8 >= 4};
}
// The code (0..15) at `at` of a panel's codes, and its writing into a zeroed nibble.
inline int repacked_code(const uint8_t* codes, RepackedNibble at) {
  return at.high ? codes[at.byte] >> 4 : codes[at.byte] & 0x0F;
}
inline void put_repacked_code(uint8_t* codes, RepackedNibble at, int u) {
  codes[at.byte] = static_cast<uint8_t>(codes[at.byte] | (at.high ? u << 4 : u));
}

// fill(panel, lane, o) for every row o < rows of panels `panel_stride` bytes apart from `data`, on the OpenMP
// threads (the repacking of every layout): a panel's 16 rows fill their own bytes, so any split of rows is safe.
template <class Fill>
void for_each_panel_row(uint8_t* data, int64_t rows, int64_t panel_stride, const Fill& fill) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < rows; ++o) fill(data + (o / kRepackedRows) * panel_stride, o % kRepackedRows, o);
}

template <class Block>
struct RepackedInt4 {
  static constexpr int kGroup = Block::kSize;
  static constexpr int kSubBlocks = kGroup / static_cast<int>(kRepackedBlock);  // 32-blocks a group
  static constexpr bool kAsym = std::is_same_v<Block, quant::BlockInt4Asym<Block::kSize>>;

  int64_t rows = 0, cols = 0;
  io::HugePageVector<uint8_t> data;  // panels() records of panel_stride() bytes

  int64_t groups() const { return (cols + kGroup - 1) / kGroup; }
  int64_t padded_cols() const { return groups() * kGroup; }
  int64_t blocks32() const { return padded_cols() / kRepackedBlock; }
  int64_t panels() const { return (rows + kRepackedRows - 1) / kRepackedRows; }
  int64_t codes_bytes() const { return blocks32() * kRepackedBlockBytes; }
  int64_t scales_offset() const { return codes_bytes(); }
  int64_t zeros_offset() const { return scales_offset() + groups() * kRepackedRows * 2; }
  int64_t panel_stride() const {
    const int64_t end = zeros_offset() + (kAsym ? groups() * kRepackedRows * 2 : 0);
    return (end + 63) / 64 * 64;
  }
  const uint8_t* panel(int64_t p) const { return data.data() + p * panel_stride(); }
  std::size_t bytes() const { return static_cast<std::size_t>(rows * groups()) * sizeof(Block); }
};

// True when every scale of w is finite: a matrix with a NaN / Inf scale stays row-wise (its layer's
// kernel path says so), so that such a model runs the kernels its rows were checked on.
template <class Block>
bool int4_scales_finite(const quant::BlockMatrix<Block>& w);

template <class Block>
RepackedInt4<Block> repack_int4(const quant::BlockMatrix<Block>& w);
template <class Block>
quant::BlockMatrix<Block> unpack_int4_repacked(const RepackedInt4<Block>& r);

// The scalar twin on the repacked layout: y[m, rows] = x · Wᵀ + bias with x quantized to q8 blocks
// (quant::quantize_row_q8_act_ref), per 32-block the exact Σ (u − z)·q, scaled by d_w · d_x, as
// gemm_int4_s8_scalar computes it on the rows. x holds padded_cols() columns.
template <class Block>
void gemm_int4_s8_repacked_ref(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m, float* y,
                               std::string_view layer);

// The same arithmetic on AVX512_VNNI (cpu_supports_avx512_vnni()), any m: sixteen rows a register, up to
// four activation rows per pass over a panel (gemm_int4_s8_repacked_avx512_vnni.cpp).
template <class Block>
void gemm_int4_s8_repacked_avx512_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                       float* y, std::string_view layer);

// The FP32 twin on the repacked layout: y = x · Wᵀ + bias with W dequantized as formats.h says
// ((u − z) · d), FP32 products summed in k order (x holds padded_cols() columns; NaN / Inf propagate).
template <class Block>
void gemm_int4_f32_repacked_ref(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m, float* y);

// int4 with FP32 activations on AVX512_VNNI, any m: the activations as 16-bit integers per 32-block in two
// INT8 limbs, exact integer block sums (gemm_int4_x16_repacked_avx512_vnni.cpp); a row with a NaN / Inf
// goes through gemm_int4_f32_repacked_ref.
template <class Block>
void gemm_int4_x16_repacked_avx512_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                        float* y);

// The avx512_bf16 level's entry (gemm_repacked_avx512_bf16.cpp): the x16 kernel at m <= 4; above, the rows'
// prefill panels decoded from the repacked layout (repacked_panel_rows_avx512.h), multiplied by oneDNN.
template <class Block>
void gemm_int4_repacked_avx512_bf16_vnni(const RepackedInt4<Block>& w, const float* bias, const float* x, int64_t m,
                                         float* y);

#define QJOULE_INT4_REPACKED_EXTERN(BLOCK)                                                                        \
  extern template bool int4_scales_finite<BLOCK>(const quant::BlockMatrix<BLOCK>&);                               \
  extern template RepackedInt4<BLOCK> repack_int4<BLOCK>(const quant::BlockMatrix<BLOCK>&);                       \
  extern template quant::BlockMatrix<BLOCK> unpack_int4_repacked<BLOCK>(const RepackedInt4<BLOCK>&);              \
  extern template void gemm_int4_s8_repacked_ref<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*,   \
                                                        int64_t, float*, std::string_view);                       \
  extern template void gemm_int4_s8_repacked_avx512_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*,         \
                                                                const float*, int64_t, float*, std::string_view); \
  extern template void gemm_int4_f32_repacked_ref<BLOCK>(const RepackedInt4<BLOCK>&, const float*, const float*,  \
                                                         int64_t, float*);                                        \
  extern template void gemm_int4_x16_repacked_avx512_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*,        \
                                                                 const float*, int64_t, float*);                  \
  extern template void gemm_int4_repacked_avx512_bf16_vnni<BLOCK>(const RepackedInt4<BLOCK>&, const float*,       \
                                                                  const float*, int64_t, float*);
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Sym<32>)
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Sym<64>)
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Sym<128>)
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Asym<32>)
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Asym<64>)
QJOULE_INT4_REPACKED_EXTERN(quant::BlockInt4Asym<128>)
#undef QJOULE_INT4_REPACKED_EXTERN

}  // namespace qjoule::kernels::detail

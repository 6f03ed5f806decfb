// FP4 weights (mxfp4, nvfp4) repacked at load for the kernel that reads them ("..._x16_repacked" kernel paths):
// the bytes of a quant::Mxfp4Matrix / Nvfp4Matrix (formats.h), permuted, nothing rounded again: the same E2M1
// codes, block scale bytes and tensor scale, so the numerics are formats.h's and the matrix unpacks back bit
// for bit (unpack_fp4_repacked).
//
// Layout: the rows in panels of 16 (the last panel padded with zero rows: codes 0, scales 0), each panel one
// contiguous record starting on a 64-byte boundary, the row's width padded to whole 32-blocks (NVFP4's half
// of a last 32-block: codes 0, scale 0):
//   codes  [nb32][4][16][4] bytes, as int4's panels (int4_repacked.h): in register j of 32-block b, the
//          four bytes of int32 lane r (the panel's row r) hold the codes of elements 32b + 8j + t (t = 0..3)
//          in their low nibbles and of 32b + 8j + 4 + t in their high ones. NVFP4's 16-blocks are registers
//          0-1 and 2-3 of a 32-block.
//   scales [nb32][S][16] bytes, S = 32 / block size (MXFP4 1, NVFP4 2): the scale byte (E8M0 / E4M3) of
//          rows 0..15 for each block of the 32-block.
//   then zero bytes up to the next multiple of 64 (the panel stride).
// bytes() is the format's size (what the record's model bytes count); the padding is not counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

template <class Packed>
struct RepackedFp4 {
  using Block = std::remove_cvref_t<decltype(*std::declval<const Packed&>().row(0))>;
  static constexpr bool kNv = std::is_same_v<Packed, quant::Nvfp4Matrix>;
  static constexpr int kScalesPerBlock32 = static_cast<int>(kRepackedBlock) / Block::kSize;  // 1 or 2

  int64_t rows = 0, cols = 0;
  float tensor_scale = 1.0f;         // NVFP4's s_t (1 for MXFP4)
  io::HugePageVector<uint8_t> data;  // panels() records of panel_stride() bytes

  int64_t blocks_per_row() const { return (cols + Block::kSize - 1) / Block::kSize; }  // the format's blocks
  int64_t blocks32() const { return (cols + kRepackedBlock - 1) / kRepackedBlock; }
  int64_t padded_cols() const { return blocks32() * kRepackedBlock; }
  int64_t panels() const { return (rows + kRepackedRows - 1) / kRepackedRows; }
  int64_t scales_offset() const { return blocks32() * kRepackedBlockBytes; }
  int64_t panel_stride() const {
    return (scales_offset() + blocks32() * kScalesPerBlock32 * kRepackedRows + 63) / 64 * 64;
  }
  const uint8_t* panel(int64_t p) const { return data.data() + p * panel_stride(); }
  // Block s (0 .. kScalesPerBlock32 − 1) of 32-block b: the scale bytes of the panel's 16 rows.
  const uint8_t* scale_bytes(const uint8_t* panel_begin, int64_t b, int s) const {
    return panel_begin + scales_offset() + (b * kScalesPerBlock32 + s) * kRepackedRows;
  }
  std::size_t bytes() const {
    return static_cast<std::size_t>(rows * blocks_per_row()) * sizeof(Block) + (kNv ? sizeof(float) : 0);
  }
};

template <class Packed>
RepackedFp4<Packed> repack_fp4(const Packed& w);
template <class Packed>
Packed unpack_fp4_repacked(const RepackedFp4<Packed>& r);

// The FP32 twin on the repacked layout: y = x · Wᵀ + bias with W decoded as the row-wise kernels decode it
// (E2M1 · (s_b · s_t), fp4_scales.h), FP32 products summed in k order (x holds padded_cols() columns; NaN /
// Inf propagate): the x16 kernel's path for activations holding a NaN or Inf.
template <class Packed>
void gemm_fp4_f32_repacked_ref(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m, float* y);

// FP4 weights × FP32 activations on AVX512_VNNI, any m (gemm_fp4_x16_repacked_avx512_vnni.cpp): the
// activations as 16-bit integers per 32-block in two INT8 limbs, the codes as the integers 2·E2M1 (exact),
// integer sums per block, the codes made bytes by vpshufb; a row with a NaN / Inf goes through
// gemm_fp4_f32_repacked_ref.
template <class Packed>
void gemm_fp4_x16_repacked_avx512_vnni(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m,
                                       float* y);

// The avx512_bf16 level's entry (gemm_repacked_avx512_bf16.cpp): the x16 kernel at m <= 4; above, the rows'
// prefill panels decoded from the repacked layout, multiplied by oneDNN.
template <class Packed>
void gemm_fp4_repacked_avx512_bf16_vnni(const RepackedFp4<Packed>& w, const float* bias, const float* x, int64_t m,
                                        float* y);

#define QJOULE_FP4_REPACKED_EXTERN(PACKED)                                                                       \
  extern template RepackedFp4<PACKED> repack_fp4<PACKED>(const PACKED&);                                         \
  extern template PACKED unpack_fp4_repacked<PACKED>(const RepackedFp4<PACKED>&);                                \
  extern template void gemm_fp4_f32_repacked_ref<PACKED>(const RepackedFp4<PACKED>&, const float*, const float*, \
                                                         int64_t, float*);                                       \
  extern template void gemm_fp4_x16_repacked_avx512_vnni<PACKED>(const RepackedFp4<PACKED>&, const float*,       \
                                                                 const float*, int64_t, float*);                 \
  extern template void gemm_fp4_repacked_avx512_bf16_vnni<PACKED>(const RepackedFp4<PACKED>&, const float*,      \
                                                                  const float*, int64_t, float*);
QJOULE_FP4_REPACKED_EXTERN(quant::Mxfp4Matrix)
QJOULE_FP4_REPACKED_EXTERN(quant::Nvfp4Matrix)
#undef QJOULE_FP4_REPACKED_EXTERN

}  // namespace qjoule::kernels::detail

// NF4 weights repacked at load for the decode GEMV that reads them ("qjoule:avx512_vnni:nf4_x16_repacked",
// "...:nf4dq_x16_repacked"): the bytes of a quant::Nf4Matrix or Nf4DqMatrix (formats.h), permuted, nothing
// rounded again: the same codes and absmax values (FP32, or nf4:dq's 8-bit codes with their group scales and
// mean), so the matrix unpacks back bit for bit (unpack_nf4_repacked, unpack_nf4dq_repacked).
//
// Layout: the rows in panels of 16 (the last panel padded with zero rows: codes 0, absmax 0 or nf4:dq's code
// for 0), each panel one contiguous record starting on a 64-byte boundary, the row's width padded to whole
// 64-blocks as formats.h pads it (code 7, the value 0):
//   codes  [nb32][4][16][4] bytes, as int4's panels (int4_repacked.h): in register j of 32-block b, the
//          four bytes of int32 lane r (the panel's row r) hold the codes of elements 32b + 8j + t (t = 0..3)
//          in their low nibbles and of 32b + 8j + 4 + t in their high ones.
//   absmax [nb64][16] FP32: the 64-block's absmax of rows 0..15 (one 64-byte register); nf4:dq: [nb64][16]
//          bytes, the rows' absmax codes, padded to 64 bytes. Their FP32 group scales (one per 256 blocks of the
//          flattened tensor, b = row · nb64 + g: groups straddle rows and panels) and the mean stay beside the
//          panels, as formats.h holds them: absmax = map[code] · scales[b / 256] + mean.
// bytes() is the format's size (what the record's model bytes count); the padding rows are not counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_only/repacked/int4_repacked.h"
#include "qjoule/io/huge_pages.h"
#include "qjoule/quant/formats.h"

namespace qjoule::kernels::detail {

struct RepackedNf4 {
  int64_t rows = 0, cols = 0;
  bool double_quant = false;         // nf4:dq: the absmax as 8-bit codes, decoded by the kernel
  io::HugePageVector<uint8_t> data;  // panels() records of panel_stride() bytes
  std::vector<float> absmax_scales;  // nf4:dq: formats.h's group scales
  float absmax_mean = 0.0f;          // nf4:dq: formats.h's mean

  int64_t blocks64() const { return (cols + quant::kNf4BlockSize - 1) / quant::kNf4BlockSize; }
  int64_t padded_cols() const { return blocks64() * quant::kNf4BlockSize; }
  int64_t blocks32() const { return padded_cols() / kRepackedBlock; }
  int64_t panels() const { return (rows + kRepackedRows - 1) / kRepackedRows; }
  int64_t absmax_offset() const { return blocks32() * kRepackedBlockBytes; }
  int64_t absmax_bytes() const { return (double_quant ? 1 : 4) * blocks64() * kRepackedRows; }
  int64_t panel_stride() const { return absmax_offset() + (absmax_bytes() + 63) / 64 * 64; }  // 64-byte multiple
  const uint8_t* panel(int64_t p) const { return data.data() + p * panel_stride(); }
  // The absmax of the panel's 16 rows for 64-block g (plain nf4).
  const float* absmax(const uint8_t* panel_begin, int64_t g) const {
    return reinterpret_cast<const float*>(panel_begin + absmax_offset()) + g * kRepackedRows;
  }
  // The absmax codes of the panel's 16 rows for 64-block g (nf4:dq).
  const uint8_t* absmax_codes(const uint8_t* panel_begin, int64_t g) const {
    return panel_begin + absmax_offset() + g * kRepackedRows;
  }
  // The absmax of row `lane` of panel p for 64-block g, as formats.h decodes it (either kind).
  float absmax_of(int64_t p, int64_t lane, int64_t g) const;
  std::size_t bytes() const {
    if (!double_quant) return static_cast<std::size_t>(rows * blocks64()) * sizeof(quant::BlockNf4);
    return static_cast<std::size_t>(rows * blocks64()) * sizeof(quant::BlockNf4Dq) +
           absmax_scales.size() * sizeof(float) + sizeof(float);
  }
};

// True when every absmax of w is finite (nf4:dq: every decoded absmax): a matrix with a NaN / Inf absmax stays
// row-wise (its layer's kernel path says so), so that such a model runs the kernels its rows were checked on.
// nf4:dq also keeps its rows when its flattened block index would not fit the kernel's int32 lanes.
bool nf4_absmax_finite(const quant::Nf4Matrix& w);
bool nf4dq_repackable(const quant::Nf4DqMatrix& w);

RepackedNf4 repack_nf4(const quant::Nf4Matrix& w);
RepackedNf4 repack_nf4(const quant::Nf4DqMatrix& w);
quant::Nf4Matrix unpack_nf4_repacked(const RepackedNf4& r);      // r from an Nf4Matrix
quant::Nf4DqMatrix unpack_nf4dq_repacked(const RepackedNf4& r);  // r from an Nf4DqMatrix

// The FP32 twin on the repacked layout: y = x · Wᵀ + bias with W decoded as formats.h says (kNf4Table[code]
// · absmax, the absmax decoded first for nf4:dq), FP32 products summed in k order (x holds padded_cols()
// columns; NaN / Inf propagate): the x16 kernel's path for activation rows holding a NaN or Inf.
void gemm_nf4_f32_repacked_ref(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y);

// NF4 weights × FP32 activations on AVX512_VNNI, any m (gemm_nf4_x16_repacked_avx512_vnni.cpp): the table's
// values as 16-bit integers round(T · 2^12), the activations as 16-bit integers per 32-block, vpdpwssd into
// int32 sums per 16 weights (nf4:dq: the rows' absmax decoded per 64-block by two gathers, as formats.h
// decodes it); a row with a NaN / Inf goes through gemm_nf4_f32_repacked_ref.
void gemm_nf4_x16_repacked_avx512_vnni(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y);

// The avx512_bf16 level's entry (gemm_repacked_avx512_bf16.cpp): the x16 kernel at m <= 4; above, the rows'
// prefill panels decoded from the repacked layout, multiplied by oneDNN.
void gemm_nf4_repacked_avx512_bf16_vnni(const RepackedNf4& w, const float* bias, const float* x, int64_t m, float* y);

}  // namespace qjoule::kernels::detail

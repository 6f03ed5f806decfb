// GPTQ (Frantar et al., 2022) into qjoule's own int4 block layout (formats.h, "int4"): the weights
// quantized column by column, each column's rounding error spread over the columns not yet quantized
// through the upper Cholesky factor U of H⁻¹ (H = Σ x xᵀ over calibration inputs, damped), in blocks
// of 128 columns with lazy updates (one GEMM a block for the columns after it).
//
// The codes are qjoule's int4 codes and nothing else: each group's scale (and zero point) comes from
// quantize_row_int4_{sym,asym}_ref on the group's weights as they stand when its first column is
// reached (the errors of the columns before it already added), and each weight's code is that group's
// rounding rule (round to nearest even, clamped) applied to its updated value, so every int4 kernel,
// export and the GPU path run the result unchanged. With act_order the columns are taken in order of
// decreasing H[j, j] and the group parameters are fixed first from the unmodified weights (GPTQ's
// "static groups": qjoule's groups stay contiguous in the original column order, so an export's g_idx
// is column / G).
//
// Linear algebra from OpenBLAS (Debian's libopenblas: LAPACK spotrf / spotri, BLAS sgemm / ssyrk).
// Invariants, tested: with H diagonal no error moves and the codes are round-to-nearest's byte for byte;
// the layer's output error on the calibration inputs, tr((W − Q) H (W − Q)ᵀ), is never above RTN's.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {

struct GptqOptions {
  double damp = 0.01;       // λ = damp · mean(diag H) added to the diagonal (GPTQ's percdamp)
  bool act_order = false;   // columns by decreasing H[j, j], static groups
  int block_columns = 128;  // lazy-update block
};

// H += Xᵀ X for X [tokens, cols] (row-major); H [cols, cols] row-major, its lower triangle (j <= i)
// only: the functions below read that triangle, so the sum is mirrored nowhere per call.
void accumulate_hessian(const float* x, int64_t tokens, int64_t cols, std::vector<float>& H);

// W [rows, cols] (row-major, finite) into BlockMatrix<Block> (Block: BlockInt4Sym<G> / BlockInt4Asym<G>,
// G = 32, 64, 128; any cols: the last group may be partial) with H [cols, cols] as above (lower triangle; finite,
// symmetric, positive semi-definite; a column whose H[j, j] is 0 saw no input and is quantized as
// zero). A factorisation that fails even after damping, or a non-finite H, is one line naming `tensor`.
template <class Block>
BlockMatrix<Block> quantize_matrix_int4_gptq(const float* w, int64_t rows, int64_t cols, std::vector<float> H,
                                             const GptqOptions& options, std::string_view tensor);

// tr((W − Q) H (W − Q)ᵀ) / tr(W H Wᵀ): the relative output error of dequantized weights `q` against `w`
// on inputs whose Σ x xᵀ is H (its lower triangle; w and q [rows, cols] row-major). For tests.
double relative_output_error(const float* w, const float* q, int64_t rows, int64_t cols, const std::vector<float>& H);

}  // namespace qjoule::quant

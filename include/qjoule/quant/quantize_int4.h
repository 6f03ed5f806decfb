// INT4 group-wise quantization, symmetric and asymmetric (layout: formats.h, "int4").
// Instantiated for G = 32, 64 and 128.
#pragma once

#include <cstdint>
#include <string_view>

#include "qjoule/quant/element_math.h"
#include "qjoule/quant/formats.h"

namespace qjoule::quant {

// A row of n weights (any n > 0) into ceil(n / G) blocks; the last may be partial, its padding codes
// decoding to 0 (formats.h, "Any width"). Dequantize writes n values. `tensor`/`row` name the row in
// errors (NaN/Inf, FP16 scale overflow).
template <int G>
void quantize_row_int4_sym_ref(const float* x, int64_t n, BlockInt4Sym<G>* y, std::string_view tensor, int64_t row);
template <int G>
void dequantize_row_int4_sym_ref(const BlockInt4Sym<G>* x, int64_t n, float* y);
template <int G>
void quantize_row_int4_asym_ref(const float* x, int64_t n, BlockInt4Asym<G>* y, std::string_view tensor, int64_t row);
template <int G>
void dequantize_row_int4_asym_ref(const BlockInt4Asym<G>* x, int64_t n, float* y);

// Whole matrix [rows, cols], any cols > 0: rows of blocks_per_row() = ceil(cols / G) blocks.
template <class Block>
BlockMatrix<Block> quantize_matrix_int4(const float* w, int64_t rows, int64_t cols, std::string_view tensor);

// Unsigned 4-bit value u of element i of a block's nibbles (nibble order: formats.h).
inline int int4_nibble(const uint8_t* qs, int64_t i) { return element::nibble_of_bytes(qs, i); }

#define QJOULE_INT4_EXTERN(G)                                                                                          \
  extern template void quantize_row_int4_sym_ref<G>(const float*, int64_t, BlockInt4Sym<G>*, std::string_view,         \
                                                    int64_t);                                                          \
  extern template void dequantize_row_int4_sym_ref<G>(const BlockInt4Sym<G>*, int64_t, float*);                        \
  extern template void quantize_row_int4_asym_ref<G>(const float*, int64_t, BlockInt4Asym<G>*, std::string_view,       \
                                                     int64_t);                                                         \
  extern template void dequantize_row_int4_asym_ref<G>(const BlockInt4Asym<G>*, int64_t, float*);                      \
  extern template BlockMatrix<BlockInt4Sym<G>> quantize_matrix_int4<BlockInt4Sym<G>>(const float*, int64_t, int64_t,   \
                                                                                     std::string_view);                \
  extern template BlockMatrix<BlockInt4Asym<G>> quantize_matrix_int4<BlockInt4Asym<G>>(const float*, int64_t, int64_t, \
                                                                                       std::string_view);
QJOULE_INT4_EXTERN(32)
QJOULE_INT4_EXTERN(64)
QJOULE_INT4_EXTERN(128)
#undef QJOULE_INT4_EXTERN

}  // namespace qjoule::quant

#include "qjoule/quant/quantize_int4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/require_finite.h"

namespace qjoule::quant {
namespace {

// FP16 bits of a group scale; a scale beyond FP16's range stops with an error naming the group.
uint16_t group_scale_fp16(float scale, std::string_view tensor, int64_t row, int64_t group, int group_size, int64_t n,
                          std::string_view scheme, float limit) {
  const uint16_t h = fp32_to_fp16_bits(scale);
  if ((h & 0x7C00u) == 0x7C00u) {
    fail("tensor '{}': int4 {} scale {} of row {} columns [{}, {}) exceeds the FP16 range (max {}); expected |w| <= {}",
         tensor, scheme, scale, row, group * group_size, std::min<int64_t>((group + 1) * group_size, n), kFp16Max,
         limit);
  }
  return h;
}

void pack_nibbles(const uint8_t* u, int n, uint8_t* qs) {
  for (int i = 0; i < n / 2; ++i) qs[i] = static_cast<uint8_t>((u[2 * i] << 4) | u[2 * i + 1]);
}

// Group g of a row of n weights, zero-padded to G (formats.h, "Any width": the last group may be partial,
// and zeros change neither max|w| nor the asym range, so the padding codes decode to exactly 0).
template <int G>
std::array<float, G> padded_group(const float* x, int64_t n, int64_t g) {
  std::array<float, G> xg{};
  const int64_t len = std::min<int64_t>(G, n - g * G);
  std::copy(x + g * G, x + g * G + len, xg.begin());
  return xg;
}

int64_t group_count(int64_t n, int G) { return (n + G - 1) / G; }

int round_clamp(float v, int lo, int hi) {
  return static_cast<int>(std::clamp(std::nearbyint(v), float(lo), float(hi)));
}

}  // namespace

template <int G>
void quantize_row_int4_sym_ref(const float* x, int64_t n, BlockInt4Sym<G>* y, std::string_view tensor, int64_t row) {
  require_finite(x, n, tensor, row, name(Format::int4));
  for (int64_t g = 0; g < group_count(n, G); ++g) {
    const std::array<float, G> xg = padded_group<G>(x, n, g);
    float amax = 0.0f;
    for (int i = 0; i < G; ++i) amax = std::max(amax, std::fabs(xg[i]));
    const uint16_t h =
        group_scale_fp16(amax / kInt4SymMaxCode, tensor, row, g, G, n, "sym", kFp16Max * kInt4SymMaxCode);
    const float d = fp16_bits_to_fp32(h);
    uint8_t u[G];
    for (int i = 0; i < G; ++i) {
      const int q = d == 0.0f ? 0 : round_clamp(xg[i] / d, -kInt4SymMaxCode, kInt4SymMaxCode);
      u[i] = static_cast<uint8_t>(q + kInt4SymZero);
    }
    y[g].d = h;
    pack_nibbles(u, G, y[g].qs);
  }
}

template <int G>
void dequantize_row_int4_sym_ref(const BlockInt4Sym<G>* x, int64_t n, float* y) {
  for (int64_t g = 0; g < group_count(n, G); ++g) {
    const float d = fp16_bits_to_fp32(x[g].d);
    const int64_t len = std::min<int64_t>(G, n - g * G);
    for (int i = 0; i < len; ++i) y[g * G + i] = static_cast<float>(int4_nibble(x[g].qs, i) - kInt4SymZero) * d;
  }
}

template <int G>
void quantize_row_int4_asym_ref(const float* x, int64_t n, BlockInt4Asym<G>* y, std::string_view tensor, int64_t row) {
  require_finite(x, n, tensor, row, name(Format::int4));
  for (int64_t g = 0; g < group_count(n, G); ++g) {
    const std::array<float, G> xg = padded_group<G>(x, n, g);
    float lo = 0.0f, hi = 0.0f;  // the range always contains 0, so 0 encodes exactly
    for (int i = 0; i < G; ++i) {
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    const uint16_t h =
        group_scale_fp16((hi - lo) / kInt4AsymMaxCode, tensor, row, g, G, n, "asym", kFp16Max * kInt4AsymMaxCode / 2);
    const float d = fp16_bits_to_fp32(h);
    const int z = d == 0.0f ? 0 : round_clamp(-lo / d, 0, kInt4AsymMaxCode);
    uint8_t u[G];
    for (int i = 0; i < G; ++i) {
      const int q =
          d == 0.0f ? 0
                    : std::clamp(round_clamp(xg[i] / d, -kInt4AsymMaxCode, kInt4AsymMaxCode) + z, 0, kInt4AsymMaxCode);
      u[i] = static_cast<uint8_t>(q);
    }
    y[g].d = h;
    y[g].zero = static_cast<uint8_t>(z);
    y[g].reserved = 0;
    pack_nibbles(u, G, y[g].qs);
  }
}

template <int G>
void dequantize_row_int4_asym_ref(const BlockInt4Asym<G>* x, int64_t n, float* y) {
  for (int64_t g = 0; g < group_count(n, G); ++g) {
    const float d = fp16_bits_to_fp32(x[g].d);
    const int z = x[g].zero;
    const int64_t len = std::min<int64_t>(G, n - g * G);
    for (int i = 0; i < len; ++i) y[g * G + i] = static_cast<float>(int4_nibble(x[g].qs, i) - z) * d;
  }
}

template <class Block>
BlockMatrix<Block> quantize_matrix_int4(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  constexpr int G = Block::kSize;
  if (rows <= 0 || cols <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, rows, cols);
  BlockMatrix<Block> m;
  m.rows = rows;
  m.cols = cols;
  m.blocks.resize(static_cast<std::size_t>(rows * m.blocks_per_row()));
  for (int64_t r = 0; r < rows; ++r) {
    Block* out = m.blocks.data() + r * m.blocks_per_row();
    if constexpr (std::is_same_v<Block, BlockInt4Sym<G>>) {
      quantize_row_int4_sym_ref<G>(w + r * cols, cols, out, tensor, r);
    } else {
      quantize_row_int4_asym_ref<G>(w + r * cols, cols, out, tensor, r);
    }
  }
  return m;
}

#define QJOULE_INT4_INSTANTIATE(G)                                                                                  \
  template void quantize_row_int4_sym_ref<G>(const float*, int64_t, BlockInt4Sym<G>*, std::string_view, int64_t);   \
  template void dequantize_row_int4_sym_ref<G>(const BlockInt4Sym<G>*, int64_t, float*);                            \
  template void quantize_row_int4_asym_ref<G>(const float*, int64_t, BlockInt4Asym<G>*, std::string_view, int64_t); \
  template void dequantize_row_int4_asym_ref<G>(const BlockInt4Asym<G>*, int64_t, float*);                          \
  template BlockMatrix<BlockInt4Sym<G>> quantize_matrix_int4<BlockInt4Sym<G>>(const float*, int64_t, int64_t,       \
                                                                              std::string_view);                    \
  template BlockMatrix<BlockInt4Asym<G>> quantize_matrix_int4<BlockInt4Asym<G>>(const float*, int64_t, int64_t,     \
                                                                                std::string_view);
QJOULE_INT4_INSTANTIATE(32)
QJOULE_INT4_INSTANTIATE(64)
QJOULE_INT4_INSTANTIATE(128)
#undef QJOULE_INT4_INSTANTIATE

}  // namespace qjoule::quant

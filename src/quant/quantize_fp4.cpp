#include "qjoule/quant/quantize_fp4.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qjoule/quant/require_finite.h"

namespace qjoule::quant {
namespace {

template <class Block>
int64_t block_count(int64_t n) {
  return (n + Block::kSize - 1) / Block::kSize;
}

float abs_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// Codes of a block's t values (t ≤ its size) divided by `divisor`, nibble-packed (first element high);
// the padding codes are 0 (+0).
template <class Block>
void pack_codes(const float* x, int64_t t, float divisor, Block& b) {
  uint8_t codes[Block::kSize] = {};
  if (divisor != 0.0f)
    for (int64_t i = 0; i < t; ++i) codes[i] = e2m1_code(x[i] / divisor);
  for (int i = 0; i < Block::kSize / 2; ++i) b.qs[i] = static_cast<uint8_t>((codes[2 * i] << 4) | codes[2 * i + 1]);
}

template <class Block>
void unpack_values(const Block& b, int64_t t, float scale, float* y) {
  for (int64_t i = 0; i < t; ++i) {
    const uint8_t byte = b.qs[i / 2];
    const uint8_t code = (i % 2 == 0) ? byte >> 4 : byte & 0x0F;
    y[i] = kE2M1Table[code] * scale;
  }
}

// NVFP4 blocks of a row already checked finite (quantize_row_nvfp4_ref, or the whole matrix once).
void quantize_finite_row_nvfp4(const float* x, int64_t n, float tensor_scale, BlockNvfp4* y) {
  for (int64_t b = 0; b < block_count<BlockNvfp4>(n); ++b) {
    const float* xb = x + b * kNvfp4BlockSize;
    const int64_t t = std::min<int64_t>(kNvfp4BlockSize, n - b * kNvfp4BlockSize);
    y[b].scale_e4m3 = e4m3_bits(abs_max(xb, t) / kE2M1Max / tensor_scale);
    pack_codes(xb, t, e4m3_value(y[b].scale_e4m3) * tensor_scale, y[b]);
  }
}

}  // namespace

uint8_t e2m1_code(float x) {
  const float a = std::fabs(x);
  // The grid 0, 0.5, 1, 1.5, 2, 3, 4, 6: a midpoint goes to the even mantissa (codes 0, 2, 4, 6).
  uint8_t code = a <= 0.25f   ? 0
                 : a < 0.75f  ? 1
                 : a <= 1.25f ? 2
                 : a < 1.75f  ? 3
                 : a <= 2.5f  ? 4
                 : a < 3.5f   ? 5
                 : a <= 5.0f  ? 6
                              : 7;
  if (code != 0 && std::signbit(x)) code |= 0x8;
  return code;
}

uint8_t e4m3_bits(float x) {
  if (!(x > 0.0f)) return 0;  // 0 (and −0; scales are never negative)
  if (x >= kE4M3Max) return 0x7E;
  int k = 0;
  std::frexp(x, &k);  // x = f · 2^k, f in [0.5, 1): the normal exponent is k − 1
  int e = k - 1;
  if (e < -6) {  // subnormal: m · 2^-9, m in 0..7 (8 rounds up into the smallest normal, 0x08)
    const auto m = static_cast<int>(std::nearbyint(std::ldexp(x, 9)));
    return static_cast<uint8_t>(m);  // m == 8 is 0x08 itself
  }
  auto m = static_cast<int>(std::nearbyint((std::ldexp(x, -e) - 1.0f) * 8.0f));
  if (m == 8) {
    m = 0;
    ++e;
  }
  if (e + 7 > 15 || (e + 7 == 15 && m == 7)) return 0x7E;  // rounded past 448: saturate
  return static_cast<uint8_t>(((e + 7) << 3) | m);
}

float e4m3_value(uint8_t bits) {
  const int e = (bits >> 3) & 0xF, m = bits & 0x7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v =
      e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (bits & 0x80) != 0 ? -v : v;
}

float e8m0_value(uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

void quantize_row_mxfp4_ref(const float* x, int64_t n, BlockMxfp4* y, std::string_view tensor, int64_t row) {
  require_finite(x, n, tensor, row, "mxfp4");
  for (int64_t b = 0; b < block_count<BlockMxfp4>(n); ++b) {
    const float* xb = x + b * kMxfp4BlockSize;
    const int64_t t = std::min<int64_t>(kMxfp4BlockSize, n - b * kMxfp4BlockSize);
    const float amax = abs_max(xb, t);
    int shared = -127;
    if (amax > 0.0f) {
      int k = 0;
      std::frexp(amax, &k);  // floor(log2(amax)) = k − 1
      shared = std::clamp(k - 1 - kE2M1MaxExponent, -127, 127);
    }
    y[b].scale_e8m0 = amax > 0.0f ? static_cast<uint8_t>(shared + 127) : 0;
    pack_codes(xb, t, amax > 0.0f ? std::ldexp(1.0f, shared) : 0.0f, y[b]);
  }
}

void dequantize_row_mxfp4_ref(const BlockMxfp4* x, int64_t n, float* y) {
  for (int64_t b = 0; b < block_count<BlockMxfp4>(n); ++b)
    unpack_values(x[b], std::min<int64_t>(kMxfp4BlockSize, n - b * kMxfp4BlockSize), e8m0_value(x[b].scale_e8m0),
                  y + b * kMxfp4BlockSize);
}

float nvfp4_tensor_scale(const float* w, int64_t n) {
  const float amax = abs_max(w, n);
  return amax > 0.0f ? amax / (kE2M1Max * kE4M3Max) : 1.0f;
}

void quantize_row_nvfp4_ref(const float* x, int64_t n, float tensor_scale, BlockNvfp4* y, std::string_view tensor,
                            int64_t row) {
  require_finite(x, n, tensor, row, "nvfp4");
  quantize_finite_row_nvfp4(x, n, tensor_scale, y);
}

void dequantize_row_nvfp4_ref(const BlockNvfp4* x, int64_t n, float tensor_scale, float* y) {
  for (int64_t b = 0; b < block_count<BlockNvfp4>(n); ++b) {
    const int64_t t = std::min<int64_t>(kNvfp4BlockSize, n - b * kNvfp4BlockSize);
    float* yb = y + b * kNvfp4BlockSize;
    unpack_values(x[b], t, e4m3_value(x[b].scale_e4m3), yb);
    for (int64_t i = 0; i < t; ++i) yb[i] *= tensor_scale;  // (E2M1 · s_b) · s_t, as formats.h decodes
  }
}

Mxfp4Matrix quantize_matrix_mxfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  Mxfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.blocks.resize(static_cast<std::size_t>(rows * m.blocks_per_row()));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row_mxfp4_ref(w + r * cols, cols, m.blocks.data() + r * m.blocks_per_row(), tensor, r);
  return m;
}

namespace {

// Rows checked finite already (before the tensor's scale: an Inf would make it Inf), not again row by row.
Nvfp4Matrix quantize_finite_matrix_nvfp4(const float* w, int64_t rows, int64_t cols, float tensor_scale) {
  Nvfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.tensor_scale = tensor_scale;
  m.blocks.resize(static_cast<std::size_t>(rows * m.blocks_per_row()));
  for (int64_t r = 0; r < rows; ++r)
    quantize_finite_row_nvfp4(w + r * cols, cols, m.tensor_scale, m.blocks.data() + r * m.blocks_per_row());
  return m;
}

}  // namespace

Nvfp4Matrix quantize_matrix_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  for (int64_t r = 0; r < rows; ++r) require_finite(w + r * cols, cols, tensor, r, "nvfp4");
  return quantize_finite_matrix_nvfp4(w, rows, cols, nvfp4_tensor_scale(w, rows * cols));
}

Nvfp4Matrix quantize_matrix_nvfp4(const float* w, int64_t rows, int64_t cols, std::string_view tensor,
                                  float tensor_scale) {
  for (int64_t r = 0; r < rows; ++r) require_finite(w + r * cols, cols, tensor, r, "nvfp4");
  return quantize_finite_matrix_nvfp4(w, rows, cols, tensor_scale);
}

}  // namespace qjoule::quant

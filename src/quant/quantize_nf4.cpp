#include "qjoule/quant/quantize_nf4.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/quantize_dynamic8.h"
#include "qjoule/quant/require_finite.h"

namespace qjoule::quant {
namespace {

int64_t block_count(int64_t n) { return (n + kNf4BlockSize - 1) / kNf4BlockSize; }

}  // namespace

uint8_t quantize_nf4_code(float x) {
  // bitsandbytes' decision tree (csrc/kernels.cu, dQuantizeNF4): the thresholds are the midpoints
  // between adjacent sorted kNf4Table values, as FP32 literals.
  if (x > 0.03979014977812767f) {
    if (x > 0.3893125355243683f) {
      if (x > 0.6427869200706482f) return x > 0.8614784181118011f ? 0b1111 : 0b1110;
      return x > 0.5016634166240692f ? 0b1101 : 0b1100;
    }
    if (x > 0.2035212516784668f) return x > 0.2920137718319893f ? 0b1011 : 0b1010;
    return x > 0.1202552504837513f ? 0b1001 : 0b1000;
  }
  if (x > -0.33967943489551544f) {
    if (x > -0.13791173323988914f) return x > -0.045525018125772476f ? 0b0111 : 0b0110;
    return x > -0.23460740596055984f ? 0b0101 : 0b0100;
  }
  if (x > -0.6106329262256622f) return x > -0.4599952697753906f ? 0b0011 : 0b0010;
  return x > -0.8480964004993439f ? 0b0001 : 0b0000;
}

void quantize_row_nf4_ref(const float* x, int64_t n, BlockNf4* y, std::string_view tensor, int64_t row) {
  require_finite(x, n, tensor, row, name(Format::nf4));
  for (int64_t b = 0; b < block_count(n); ++b) {
    // The last block of a row may be partial: zero-padded, which leaves absmax unchanged and gives
    // the padding code 7 (0.0), formats.h "Any width".
    std::array<float, kNf4BlockSize> xb{};
    const int64_t len = std::min<int64_t>(kNf4BlockSize, n - b * kNf4BlockSize);
    std::copy(x + b * kNf4BlockSize, x + b * kNf4BlockSize + len, xb.begin());
    float amax = 0.0f;
    for (int i = 0; i < kNf4BlockSize; ++i) amax = std::max(amax, std::fabs(xb[i]));
    uint8_t code[kNf4BlockSize];
    if (amax == 0.0f) {
      std::fill(code, code + kNf4BlockSize, kNf4ZeroCode);
    } else {
      const float inv = 1.0f / amax;            // bitsandbytes multiplies by the reciprocal
      const bool divide = !std::isfinite(inv);  // subnormal absmax
      for (int i = 0; i < kNf4BlockSize; ++i) code[i] = quantize_nf4_code(divide ? xb[i] / amax : xb[i] * inv);
    }
    y[b].absmax = amax;
    for (int i = 0; i < kNf4BlockSize / 2; ++i) y[b].qs[i] = static_cast<uint8_t>((code[2 * i] << 4) | code[2 * i + 1]);
  }
}

void dequantize_row_nf4_ref(const BlockNf4* x, int64_t n, float* y) {
  for (int64_t b = 0; b < block_count(n); ++b) {
    const int64_t len = std::min<int64_t>(kNf4BlockSize, n - b * kNf4BlockSize);
    for (int64_t i = 0; i < len; ++i) {
      y[b * kNf4BlockSize + i] =
          kNf4Table[static_cast<std::size_t>(element::nibble_of_bytes(x[b].qs, i))] * x[b].absmax;
    }
  }
}

Nf4Matrix quantize_matrix_nf4(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  if (rows <= 0 || cols <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, rows, cols);
  Nf4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.blocks.resize(static_cast<std::size_t>(rows * m.blocks_per_row()));
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row_nf4_ref(w + r * cols, cols, m.blocks.data() + r * m.blocks_per_row(), tensor, r);
  }
  return m;
}

Nf4DqMatrix quantize_matrix_nf4_double(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  const Nf4Matrix single = quantize_matrix_nf4(w, rows, cols, tensor);
  const std::size_t nb = single.blocks.size();
  double sum = 0.0;
  for (const BlockNf4& b : single.blocks) sum += b.absmax;
  Nf4DqMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.absmax_mean = static_cast<float>(sum / static_cast<double>(nb));  // bitsandbytes: absmax.mean() in FP32
  std::vector<float> centered(nb);
  for (std::size_t b = 0; b < nb; ++b) centered[b] = single.blocks[b].absmax - m.absmax_mean;
  std::vector<uint8_t> codes(nb);
  m.absmax_scales.resize((nb + kNf4DoubleQuantGroup - 1) / kNf4DoubleQuantGroup);
  quantize_blockwise_dynamic8_ref(centered.data(), static_cast<int64_t>(nb), kNf4DoubleQuantGroup, codes.data(),
                                  m.absmax_scales.data());
  m.blocks.resize(nb);
  for (std::size_t b = 0; b < nb; ++b) {
    m.blocks[b].absmax_code = codes[b];
    std::copy(std::begin(single.blocks[b].qs), std::end(single.blocks[b].qs), m.blocks[b].qs);
  }
  return m;
}

void dequantize_row_nf4_dq_ref(const Nf4DqMatrix& w, int64_t r, float* y) {
  for (int64_t kb = 0; kb < w.blocks_per_row(); ++kb) {
    const BlockNf4Dq& blk = w.row(r)[kb];
    const float absmax = w.absmax(r * w.blocks_per_row() + kb);
    const int64_t len = std::min<int64_t>(kNf4BlockSize, w.cols - kb * kNf4BlockSize);
    for (int64_t i = 0; i < len; ++i) {
      const uint8_t byte = blk.qs[i / 2];
      y[kb * kNf4BlockSize + i] = kNf4Table[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * absmax;
    }
  }
}

}  // namespace qjoule::quant

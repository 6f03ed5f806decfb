#include "qjoule/quant/quantize_fp16.h"

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/fp16_convert.h"
#include "qjoule/quant/require_finite.h"

namespace qjoule::quant {

Fp16Matrix quantize_matrix_fp16(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  if (rows <= 0 || cols <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, rows, cols);
  Fp16Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.bits.resize(static_cast<std::size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = w + r * cols;
    require_finite(x, cols, tensor, r, name(Format::fp16));
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t h = fp32_to_fp16_bits(x[c]);
      if ((h & 0x7C00u) == 0x7C00u) {
        fail("tensor '{}': {} at [{}, {}] is outside the FP16 range; expected |w| <= {} to store as fp16", tensor, x[c],
             r, c, kFp16Max);
      }
      m.bits[static_cast<std::size_t>(r * cols + c)] = h;
    }
  }
  return m;
}

void dequantize_row_fp16_ref(const uint16_t* bits, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_bits_to_fp32(bits[i]);
}

}  // namespace qjoule::quant

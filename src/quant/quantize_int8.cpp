#include "qjoule/quant/quantize_int8.h"

#include <algorithm>
#include <cmath>

#include "qjoule/error.h"
#include "qjoule/quant/format.h"
#include "qjoule/quant/require_finite.h"

namespace qjoule::quant {

float quantize_row_int8_ref(const float* x, int64_t n, int8_t* q, std::string_view tensor, int64_t row) {
  require_finite(x, n, tensor, row, name(Format::int8));
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  float scale = amax / static_cast<float>(kInt8MaxCode);
  // near FLT_MAX the rounded scale can make 127 · scale overflow: step it down so ±127 decode finite
  if (!std::isfinite(scale * static_cast<float>(kInt8MaxCode))) scale = std::nextafter(scale, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale == 0.0f ? 0.0f : std::nearbyint(x[i] / scale);
    q[i] = static_cast<int8_t>(std::clamp(v, -static_cast<float>(kInt8MaxCode), static_cast<float>(kInt8MaxCode)));
  }
  return scale;
}

void dequantize_row_int8_ref(const int8_t* q, float scale, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
}

Int8Matrix quantize_matrix_int8(const float* w, int64_t rows, int64_t cols, std::string_view tensor) {
  if (rows <= 0 || cols <= 0) fail("tensor '{}': shape [{}, {}]; expected positive dimensions", tensor, rows, cols);
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.q.resize(static_cast<std::size_t>(rows * cols));
  m.scales.resize(static_cast<std::size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    m.scales[static_cast<std::size_t>(r)] = quantize_row_int8_ref(w + r * cols, cols, m.q.data() + r * cols, tensor, r);
  }
  return m;
}

}  // namespace qjoule::quant

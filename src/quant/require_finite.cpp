#include "qjoule/quant/require_finite.h"

#include <cmath>

#include "qjoule/error.h"

namespace qjoule::quant {

void require_finite(const float* x, int64_t n, std::string_view tensor, int64_t row, std::string_view format) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) continue;
    const char* found = std::isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf");
    fail("tensor '{}': {} at [{}, {}]; expected finite weights to quantize to {}", tensor, found, row, i, format);
  }
}

}  // namespace qjoule::quant

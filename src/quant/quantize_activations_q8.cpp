#include "qjoule/quant/quantize_activations_q8.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "qjoule/error.h"

namespace qjoule::quant {

void quantize_row_q8_act_ref(const float* x, int64_t n, BlockQ8Act* y, std::string_view layer, int64_t row) {
  if (n % kQ8ActBlockSize != 0) {
    fail("layer '{}': {} activations per row are not a multiple of {}; expected whole INT8 activation blocks", layer, n,
         kQ8ActBlockSize);
  }
  for (int64_t b = 0; b < n / kQ8ActBlockSize; ++b) {
    const float* xb = x + b * kQ8ActBlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kQ8ActBlockSize; ++i) {
      if (!std::isfinite(xb[i])) {
        fail("layer '{}': activation {} at [{}, {}]; expected finite activations to quantize to INT8", layer, xb[i],
             row, b * kQ8ActBlockSize + i);
      }
      amax = std::max(amax, std::fabs(xb[i]));
    }
    const float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!(id <= FLT_MAX)) id = 0.0f;  // subnormal d: the block is ~0 and encodes as zeros
    int32_t sum = 0;
    for (int i = 0; i < kQ8ActBlockSize; ++i) {
      const int q = static_cast<int>(std::clamp(std::nearbyint(xb[i] * id), -127.0f, 127.0f));
      y[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    y[b].d = d;
    y[b].sum = sum;
  }
}

}  // namespace qjoule::quant

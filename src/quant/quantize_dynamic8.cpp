#include "qjoule/quant/quantize_dynamic8.h"

#include <algorithm>
#include <cmath>

namespace qjoule::quant {

uint8_t quantize_dynamic8_code(float x) {
  // bitsandbytes' dQuantize<0> (csrc/kernels.cu), step for step.
  const std::array<float, 256>& code = dynamic_map_signed();
  int pivot = 127, upper_pivot = 255, lower_pivot = 0;
  float lower = -1.0f, upper = 1.0f;
  float val = code[static_cast<std::size_t>(pivot)];
  for (int i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = code[static_cast<std::size_t>(pivot)];
  }
  if (upper_pivot == 255) upper = code[255];
  if (lower_pivot == 0) lower = code[0];
  if (x > val) {
    const float midpoint = (upper + val) * 0.5f;
    return static_cast<uint8_t>(x > midpoint ? upper_pivot : pivot);
  }
  const float midpoint = (lower + val) * 0.5f;
  return static_cast<uint8_t>(x < midpoint ? lower_pivot : pivot);
}

void quantize_blockwise_dynamic8_ref(const float* x, int64_t n, int64_t block_size, uint8_t* codes, float* scales) {
  for (int64_t b0 = 0, j = 0; b0 < n; b0 += block_size, ++j) {
    const int64_t len = std::min(block_size, n - b0);
    float amax = 0.0f;
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
    scales[j] = amax;
    if (amax == 0.0f) {
      std::fill(codes + b0, codes + b0 + len, kDynamicMapZeroCode);
      continue;
    }
    const float inv = 1.0f / amax;
    const bool divide = !std::isfinite(inv);
    for (int64_t i = 0; i < len; ++i)
      codes[b0 + i] = quantize_dynamic8_code(divide ? x[b0 + i] / amax : x[b0 + i] * inv);
  }
}

}  // namespace qjoule::quant

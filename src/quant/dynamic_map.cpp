// bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), evaluated in FP32
// the way torch evaluates the Python: for each exponent i = 0..6, boundaries = linspace(0.1, 1, 2^i + 1)
// (torch's symmetric formula: start + step·j for the first half, end − step·(n − 1 − j) for the rest),
// means of adjacent boundaries, times ±10^(i − 6); then 0 and 1.0; sorted. 2 · 127 + 2 = 256 values.
#include <algorithm>
#include <cmath>
#include <vector>

#include "qjoule/quant/formats.h"

namespace qjoule::quant {
namespace {

std::array<float, 256> create_dynamic_map_signed() {
  constexpr int kMaxExponentBits = 7;
  constexpr int kNonSignBits = 7;  // total_bits - 1
  std::vector<float> data;
  for (int i = 0; i < kMaxExponentBits; ++i) {
    const int n = (1 << (i + kNonSignBits - kMaxExponentBits)) + 1;
    const float start = 0.1f, end = 1.0f;
    const float step = (end - start) / static_cast<float>(n - 1);
    std::vector<float> boundaries(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      boundaries[static_cast<std::size_t>(j)] =
          j < n / 2 ? start + step * static_cast<float>(j) : end - step * static_cast<float>(n - 1 - j);
    }
    const auto power = static_cast<float>(std::pow(10.0, -(kMaxExponentBits - 1) + i));
    for (int j = 0; j + 1 < n; ++j) {
      const float mean = (boundaries[static_cast<std::size_t>(j)] + boundaries[static_cast<std::size_t>(j + 1)]) / 2.0f;
      data.push_back(power * mean);
      data.push_back(-power * mean);
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> map{};
  std::copy_n(data.begin(), map.size(), map.begin());
  return map;
}

}  // namespace

const std::array<float, 256>& dynamic_map_signed() {
  static const std::array<float, 256> map = create_dynamic_map_signed();
  return map;
}

}  // namespace qjoule::quant

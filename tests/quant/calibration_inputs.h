// Inputs for the calibration tests (GPTQ, AWQ): Gaussian weights and activations whose columns are
// correlated, with a few large channels, as a transformer's are.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace qjoule::quant::calibration_test {

inline std::vector<float> gaussian(std::size_t n, unsigned seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Inputs with correlated columns, as a transformer's activations are: x = z · M (+ a few large channels).
inline std::vector<float> correlated_inputs(int64_t tokens, int64_t cols, unsigned seed) {
  const auto z = gaussian(size_t(tokens * cols), seed, 1.0f);
  const auto mix = gaussian(size_t(cols * cols), seed + 1, 1.0f / std::sqrt(float(cols)));
  std::vector<float> x(size_t(tokens * cols), 0.0f);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < cols; ++k) {
      float s = 0.0f;
      for (int64_t j = 0; j < cols; ++j) s += z[size_t(t * cols + j)] * mix[size_t(j * cols + k)];
      x[size_t(t * cols + k)] = s * (k % 17 == 0 ? 6.0f : 1.0f);
    }
  return x;
}

}  // namespace qjoule::quant::calibration_test

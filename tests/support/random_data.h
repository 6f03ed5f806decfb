// Reproducible random test data: N(0, sigma²) floats from a seeded mt19937.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace qjoule::test {

inline std::vector<float> random_vector(std::size_t n, unsigned seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace qjoule::test

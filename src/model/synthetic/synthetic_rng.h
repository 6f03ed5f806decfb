// The fixed-seed generator of qjoule's synthetic models: splitmix64, small, fast and identical
// everywhere (std::normal_distribution is not specified bit for bit across standard libraries).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qjoule/model/encoder_params.h"

namespace qjoule::model::detail {

class SyntheticRng {
 public:
  explicit SyntheticRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // N(0, 1) by the sum of 4 uniforms, rescaled: cheap, bounded (|x| < 3.5), and close enough for
  // weights whose only job is to have realistic magnitudes.
  float normal() {
    const double s = uniform() + uniform() + uniform() + uniform() - 2.0;
    return static_cast<float>(s * std::sqrt(3.0));
  }

 private:
  std::uint64_t state_;
};

inline std::vector<float> synthetic_normal_vector(SyntheticRng& rng, int64_t n, float stddev) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = stddev * rng.normal();
  return v;
}

// A Linear named `name`, weights ~ N(0, 0.02) (BERT's and Llama's initializer), bias zeros or none.
inline LinearParams synthetic_linear(SyntheticRng& rng, std::string name, int64_t out, int64_t in, bool zero_bias) {
  LinearParams p;
  p.name = std::move(name);
  p.out_features = out;
  p.in_features = in;
  p.weight = synthetic_normal_vector(rng, out * in, 0.02f);
  if (zero_bias) p.bias.assign(static_cast<std::size_t>(out), 0.0f);
  return p;
}

}  // namespace qjoule::model::detail

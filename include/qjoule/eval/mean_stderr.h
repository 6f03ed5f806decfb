// The standard error of a mean: sqrt(s² / n) with s² the sample variance (n − 1), as lm-eval's
// mean_stderr; 0 for fewer than two values. Given paired differences (a run's figure minus FP32's on
// the same item or token) it is the standard error of the mean difference, which the pairing makes
// far smaller than either side's own.
#pragma once

#include <cmath>
#include <vector>

namespace qjoule::eval {

inline double mean_stderr(const std::vector<double>& values) {
  const auto n = static_cast<double>(values.size());
  if (values.size() < 2) return 0.0;
  double mean = 0.0;
  for (const double v : values) mean += v;
  mean /= n;
  double ss = 0.0;
  for (const double v : values) ss += (v - mean) * (v - mean);
  return std::sqrt(ss / (n - 1.0) / n);
}

}  // namespace qjoule::eval

// Comparing a kernel's output with its reference in the tests: the largest absolute difference, and a figure
// written for RecordProperty.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace qjoule::test {

// Largest |a - b| over two equal-length vectors.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

// Three significant digits: "1.23e-06".
inline std::string sci(double v) { return fmt::format("{:.3g}", v); }

}  // namespace qjoule::test

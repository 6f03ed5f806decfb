// A gtest parameter's name from a fixture's folder name ("tiny-llama" -> "tiny_llama": gtest names take
// letters, digits and underscores only).
#pragma once

#include <algorithm>
#include <string>

namespace qjoule::test {

inline std::string param_name(std::string s) {
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// INSTANTIATE_TEST_SUITE_P's name generator for a suite whose parameter is a fixture's name.
struct FixtureParamName {
  template <class Info>
  std::string operator()(const Info& info) const {
    return param_name(info.param);
  }
};

}  // namespace qjoule::test

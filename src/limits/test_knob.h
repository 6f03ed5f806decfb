// A number a test sets in the environment to stand for a measurement (QJOULE_TEST_CONTENDED_CORES,
// QJOULE_TEST_HOST_CAPACITY): tests run side by side and must know what a measurement read. Internal to
// qjoule_limits.
#pragma once

#include <cstdlib>
#include <optional>

#include "qjoule/error.h"

namespace qjoule::limits {

// nullopt when `name` is unset or empty; a value that is not a number `valid` accepts fails in one line
// ("NAME=VALUE: expected EXPECTED (a test knob)").
template <class Valid>
std::optional<double> number_knob(const char* name, Valid valid, const char* expected) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (*end != '\0' || !valid(value)) fail("{}={}: expected {} (a test knob)", name, text, expected);
  return value;
}

}  // namespace qjoule::limits

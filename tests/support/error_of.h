// The one-line message a call throws as qjoule::Error, for tests that check messages; a call that
// throws nothing is a test failure (and gives "").
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "qjoule/error.h"

namespace qjoule::test {

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a qjoule::Error";
  return "";
}

}  // namespace qjoule::test

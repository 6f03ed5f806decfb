// The one table of kernel overrides (qjoule/kernels/kernel_overrides.h): each variable read through it,
// a value it does not take is one line naming the variable, the value and what it takes, and what is in
// force is what a record names.
#include "qjoule/kernels/kernel_overrides.h"

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"

namespace {

using namespace qjoule::kernels;
using ::testing::HasSubstr;

// Sets a variable for one scope, putting back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* before = std::getenv(name)) saved_ = before;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_) {
      ::setenv(name_, saved_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

TEST(KernelOverrides, OneRowPerOverrideInEnumOrderWithItsDocumentation) {
  std::set<std::string_view> variables;
  std::size_t i = 0;
  for (const auto& row : all_kernel_overrides()) {
    EXPECT_EQ(static_cast<std::size_t>(row.id), i++) << row.variable;
    EXPECT_TRUE(row.variable.starts_with("QJOULE_")) << row.variable;
    EXPECT_TRUE(variables.insert(row.variable).second) << row.variable << " twice";
    EXPECT_FALSE(row.expected.empty()) << row.variable;
    EXPECT_FALSE(row.unset.empty()) << row.variable;
    EXPECT_FALSE(row.doc.empty()) << row.variable;
  }
  EXPECT_EQ(variables.size(), 8u);
}

TEST(KernelOverrides, ReadsTheValueItTakesAndNothingElse) {
  {
    const ScopedEnv e("QJOULE_WEIGHT_ONLY_DECODE", "x16");
    EXPECT_EQ(kernel_override(KernelOverride::weight_only_decode), "x16");
  }
  {
    const ScopedEnv e("QJOULE_WEIGHT_ONLY_DECODE", "");
    EXPECT_EQ(kernel_override(KernelOverride::weight_only_decode), std::nullopt);  // empty: unset
  }
  {
    const ScopedEnv e("QJOULE_WEIGHT_ONLY_DECODE", "fast");
    EXPECT_EQ(qjoule::test::error_of([] { (void)kernel_override(KernelOverride::weight_only_decode); }),
              "QJOULE_WEIGHT_ONLY_DECODE=fast: expected x16 or float");
  }
  {
    const ScopedEnv e("QJOULE_TOKENS_PER_PASS", "40");
    EXPECT_EQ(kernel_override_count(KernelOverride::tokens_per_pass), 40);
  }
  for (const char* bad : {"0", "-3", "4k", "lots", "99999999999999999999"}) {
    const ScopedEnv e("QJOULE_TOKENS_PER_PASS", bad);
    EXPECT_EQ(qjoule::test::error_of([] { (void)kernel_override_count(KernelOverride::tokens_per_pass); }),
              std::string("QJOULE_TOKENS_PER_PASS=") + bad + ": expected a positive number of tokens");
  }
}

TEST(KernelOverrides, WhatIsInForceIsEverySetVariableCheckedAndTheTableSaysItsValue) {
  const ScopedEnv a("QJOULE_CUDA_GEMV4", "plain");
  const ScopedEnv b("QJOULE_FORCE_SCALAR", "1");
  const auto forced = kernel_overrides_in_force();
  EXPECT_EQ(forced.at("QJOULE_CUDA_GEMV4"), "plain");
  EXPECT_EQ(forced.at("QJOULE_FORCE_SCALAR"), "1");
  EXPECT_EQ(forced.count("QJOULE_WEIGHT_ONLY_PANEL"), std::getenv("QJOULE_WEIGHT_ONLY_PANEL") ? 1u : 0u);
  const std::string table = kernel_overrides_table();
  EXPECT_THAT(table, HasSubstr("QJOULE_CUDA_GEMV4=split|plain"));
  EXPECT_THAT(table, HasSubstr("now: plain"));
  EXPECT_THAT(table, HasSubstr("QJOULE_TOKENS_PER_PASS=N"));
  const ScopedEnv c("QJOULE_DECODE_GRAPH", "off");
  EXPECT_THAT(qjoule::test::error_of([] { (void)kernel_overrides_in_force(); }),
              HasSubstr("QJOULE_DECODE_GRAPH=off: expected 0 (every decode step kernel by kernel) or 1"));
}

}  // namespace

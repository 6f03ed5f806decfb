// The arithmetic of windows: counter unwrapping, interpolation between samples, extrapolation.
#include <gtest/gtest.h>

#include "energy/cumulative.h"

namespace qjoule::energy {
namespace {

TEST(EnergyCounterDelta, CountsForwardSteps) {
  std::uint64_t wraps = 0, resets = 0;
  EXPECT_EQ(counter_delta(100, 250, 1000, wraps, resets), 150u);
  EXPECT_EQ(wraps, 0u);
  EXPECT_EQ(resets, 0u);
}

TEST(EnergyCounterDelta, UnwrapsAtTheRange) {
  std::uint64_t wraps = 0, resets = 0;
  EXPECT_EQ(counter_delta(900, 50, 1000, wraps, resets), 150u);  // 100 to the top, then 50
  EXPECT_EQ(wraps, 1u);
  EXPECT_EQ(resets, 0u);
}

TEST(EnergyCounterDelta, BackwardsWithoutRangeIsAReset) {
  std::uint64_t wraps = 0, resets = 0;
  EXPECT_EQ(counter_delta(900, 50, 0, wraps, resets), 0u);
  EXPECT_EQ(wraps, 0u);
  EXPECT_EQ(resets, 1u);
}

Cumulative at(std::int64_t t, double counter, double integral, double covered, double power) {
  Cumulative c;
  c.time_ns = t;
  c.counter_j = counter;
  c.integral_j = integral;
  c.covered_s = covered;
  c.power_w = power;
  c.has_power = true;
  c.samples = 3;
  return c;
}

TEST(EnergyInterpolate, IsLinearInCounterAndTrapezoidalInPower) {
  const Cumulative prev = at(1'000'000'000, 10.0, 5.0, 1.0, 100.0);
  const Cumulative next = at(1'100'000'000, 20.0, 5.0 + 0.1 * 150.0, 1.1, 200.0);
  const Cumulative mid = interpolate(prev, next, 1'050'000'000, 200'000'000);
  EXPECT_DOUBLE_EQ(mid.counter_j, 15.0);
  EXPECT_DOUBLE_EQ(mid.power_w, 150.0);
  EXPECT_NEAR(mid.integral_j, 5.0 + 0.05 * 125.0, 1e-12);
  EXPECT_NEAR(mid.covered_s, 1.05, 1e-12);
  EXPECT_EQ(mid.samples, prev.samples);
}

TEST(EnergyInterpolate, AGapLongerThanTheLimitIsNotCovered) {
  const Cumulative prev = at(0, 0.0, 0.0, 0.0, 10.0);
  const Cumulative next = at(1'000'000'000, 10.0, 10.0, 1.0, 10.0);
  const Cumulative mid = interpolate(prev, next, 500'000'000, 100'000'000);
  EXPECT_DOUBLE_EQ(mid.covered_s, 0.0);
  EXPECT_DOUBLE_EQ(mid.integral_j, 0.0) << "a hole is never filled in by a guess";
  EXPECT_DOUBLE_EQ(mid.counter_j, 5.0) << "a counter loses nothing across a hole";
}

TEST(EnergyExtrapolate, HoldsPowerOnlyWithinTheGapLimit) {
  const Cumulative last = at(0, 7.0, 3.0, 2.0, 10.0);
  const Cumulative near = extrapolate(last, 50'000'000, 100'000'000);
  EXPECT_DOUBLE_EQ(near.counter_j, 7.0);
  EXPECT_NEAR(near.integral_j, 3.5, 1e-12);
  EXPECT_NEAR(near.covered_s, 2.05, 1e-12);
  const Cumulative far = extrapolate(last, 500'000'000, 100'000'000);
  EXPECT_DOUBLE_EQ(far.integral_j, 3.0);
  EXPECT_DOUBLE_EQ(far.covered_s, 2.0);
}

TEST(EnergyBeforeFirst, CountsNothingYet) {
  Cumulative first = at(100, 0.0, 0.0, 0.0, 5.0);
  first.samples = 1;
  const Cumulative before = before_first(first, 50);
  EXPECT_EQ(before.samples, 0u);
  EXPECT_FALSE(before.has_power);
}

}  // namespace
}  // namespace qjoule::energy

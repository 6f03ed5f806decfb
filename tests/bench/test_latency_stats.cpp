// summarize_latency against hand-computed values (numpy.percentile's linear interpolation).
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/bench/latency_stats.h"
#include "qjoule/error.h"

namespace qjoule::bench {
namespace {

TEST(BenchLatencyStats, OneToTen) {
  // mean 5.5; squares about the mean sum to 82.5, / (n - 1) = 9.1667, sqrt = 3.02765;
  // p50: rank 4.5 -> 5.5; p90: rank 8.1 -> 9.1; p99: rank 8.91 -> 9.91.
  const auto s = summarize_latency({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(s.count, 10u);
  EXPECT_DOUBLE_EQ(s.mean_ms, 5.5);
  EXPECT_NEAR(s.std_ms, std::sqrt(82.5 / 9.0), 1e-12);
  EXPECT_NEAR(s.std_ms, 3.02765, 1e-5);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 10);
  EXPECT_NEAR(s.p50_ms, 5.5, 1e-12);
  EXPECT_NEAR(s.p90_ms, 9.1, 1e-12);
  EXPECT_NEAR(s.p99_ms, 9.91, 1e-12);
}

TEST(BenchLatencyStats, ThreeUnsortedSamples) {
  // sorted 1, 3, 4: mean 8/3; deviations -5/3, 1/3, 4/3 -> squares 42/9, / 2 = 21/9;
  // p50 rank 1 -> 3; p90 rank 1.8 -> 3.8; p99 rank 1.98 -> 3.98.
  const auto s = summarize_latency({4, 1, 3});
  EXPECT_NEAR(s.mean_ms, 8.0 / 3.0, 1e-12);
  EXPECT_NEAR(s.std_ms, std::sqrt(21.0 / 9.0), 1e-12);
  EXPECT_NEAR(s.p50_ms, 3.0, 1e-12);
  EXPECT_NEAR(s.p90_ms, 3.8, 1e-12);
  EXPECT_NEAR(s.p99_ms, 3.98, 1e-12);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 4);
}

TEST(BenchLatencyStats, EvenCountMedianIsTheMidpoint) {
  const auto s = summarize_latency({2, 8});
  EXPECT_DOUBLE_EQ(s.p50_ms, 5);
  EXPECT_DOUBLE_EQ(s.p90_ms, 7.4);  // rank 0.9
  EXPECT_NEAR(s.std_ms, std::sqrt(18.0), 1e-12);
}

TEST(BenchLatencyStats, OneSampleHasZeroSpread) {
  const auto s = summarize_latency({7.25});
  EXPECT_EQ(s.count, 1u);
  EXPECT_DOUBLE_EQ(s.std_ms, 0);
  EXPECT_DOUBLE_EQ(s.p50_ms, 7.25);
  EXPECT_DOUBLE_EQ(s.p99_ms, 7.25);
  EXPECT_DOUBLE_EQ(s.min_ms, 7.25);
  EXPECT_DOUBLE_EQ(s.max_ms, 7.25);
}

TEST(BenchLatencyStats, EmptyOrNonFiniteFails) {
  EXPECT_THROW(summarize_latency({}), Error);
  try {
    summarize_latency({1.0, std::numeric_limits<double>::quiet_NaN()});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("sample 1 is nan ms"));
  }
  EXPECT_THROW(summarize_latency({-1.0}), Error);
}

}  // namespace
}  // namespace qjoule::bench

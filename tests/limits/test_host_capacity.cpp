// What the host delivered around a run: the share against the limits' fp32 peak, when it counts as
// busy and the line that says so, its JSON, the test knobs, and the probes (FMA, read) on this CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "error_of.h"
#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/host_capacity.h"
#include "qjoule/limits/memory_bandwidth.h"

namespace qjoule::limits {
namespace {

using qjoule::test::error_of;
using ::testing::HasSubstr;

HostCapacity capacity(std::optional<double> before, std::optional<double> after, std::optional<double> peak,
                      double cores, int threads = 2) {
  HostCapacity h;
  h.threads = threads;
  h.fp32_gflops_before = before;
  h.fp32_gflops_after = after;
  h.fp32_peak_gflops = peak;
  h.contending_cores = cores;
  return h;
}

TEST(HostCapacity, TheShareIsTheLowerProbeOverThePeakOrTheCoresOthersLeftWhicheverIsLower) {
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(300, 200, 400, 0)), 0.5);
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(400, 400, 400, 0.5)), 0.75);  // half of one of 2 cores taken
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(500, 450, 400, 0)), 1.0);     // a low peak: at most 1
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(std::nullopt, 200, 400, 0)), 0.5);
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(std::nullopt, std::nullopt, std::nullopt, 1.0)), 0.5);
  EXPECT_DOUBLE_EQ(*delivered_fraction(capacity(100, 100, 400, 3.0)), 0.0);  // more taken than it had
  EXPECT_FALSE(delivered_fraction(capacity(std::nullopt, std::nullopt, std::nullopt, 0, 0)));
}

TEST(HostCapacity, BelowEightyPercentTheHostIsBusyAndTheLineSaysWhatWasMeasured) {
  EXPECT_EQ(busy_host_line(capacity(330, 340, 400, 0)), "");  // 82%
  EXPECT_EQ(busy_host_line(capacity(std::nullopt, std::nullopt, std::nullopt, 0, 0)), "");
  EXPECT_EQ(busy_host_line(capacity(226, 240, 411, 0.4)),
            "the host delivered 55% of its measured FP32 peak around this run (FMA probes 226 / 240 GFLOP/s of "
            "411; other processes took 0.40 cores)");
  EXPECT_EQ(busy_host_line(capacity(std::nullopt, 240, 411, 0)),
            "the host delivered 58% of its measured FP32 peak around this run (FMA probes - / 240 GFLOP/s of 411; "
            "other processes took 0.00 cores)");
  EXPECT_EQ(busy_host_line(capacity(std::nullopt, std::nullopt, std::nullopt, 1.0)),
            "the host delivered 50% of its measured FP32 peak around this run (other processes took 1.00 cores)");
}

TEST(HostCapacity, AProbeAboveThePeakSaysThePeakWasMeasuredLow) {
  EXPECT_EQ(low_peak_line(capacity(420, 400, 370, 0)), "");  // 1.14x: within the probes' spread
  EXPECT_EQ(low_peak_line(capacity(458, 400, std::nullopt, 0)), "");
  EXPECT_EQ(low_peak_line(capacity(std::nullopt, std::nullopt, 370, 0)), "");
  EXPECT_EQ(low_peak_line(capacity(400, 458, 370, 0)),
            "the FMA probes around this run read up to 458 GFLOP/s, 1.24x the limits' fp32 peak of 370: the limits "
            "were measured on a busier host, and this run's % roof figures read high");
  EXPECT_THAT(low_peak_line(capacity(458, std::nullopt, 370, 0)), HasSubstr("up to 458 GFLOP/s"));
}

TEST(HostCapacity, ItsJsonHasTheProbesTheShareTheLineAndTheMethod) {
  const auto j = to_json(capacity(226, std::nullopt, 411, 0.4));
  EXPECT_EQ(j["threads"], 2);
  EXPECT_EQ(j["fp32_gflops_before"], 226.0);
  EXPECT_TRUE(j["fp32_gflops_after"].is_null());
  EXPECT_EQ(j["fp32_peak_gflops"], 411.0);
  EXPECT_EQ(j["contending_cores"], 0.4);
  EXPECT_NEAR(j["delivered_fraction"].get<double>(), 226.0 / 411.0, 1e-12);
  EXPECT_THAT(j["busy"].get<std::string>(), HasSubstr("the host delivered 55%"));
  EXPECT_THAT(j["method"].get<std::string>(), HasSubstr("median of 5 trials"));
  EXPECT_TRUE(to_json(capacity(std::nullopt, std::nullopt, std::nullopt, 0, 0))["delivered_fraction"].is_null());
}

TEST(HostCapacity, TheTestKnobStandsForBothProbesAgainstThePeak) {
  ::setenv("QJOULE_TEST_HOST_CAPACITY", "0.5", 1);
  const auto h = compared_with(capacity(400, 400, std::nullopt, 0), 300.0);
  EXPECT_EQ(h.fp32_peak_gflops, 300.0);
  EXPECT_EQ(h.fp32_gflops_before, 150.0);
  EXPECT_EQ(h.fp32_gflops_after, 150.0);
  ::setenv("QJOULE_TEST_HOST_CAPACITY", "most", 1);
  EXPECT_THAT(error_of([] { compared_with(HostCapacity{}, 300.0); }),
              HasSubstr("QJOULE_TEST_HOST_CAPACITY=most: expected the share of the peak the host delivers, > 0 (a "
                        "test knob)"));
  ::unsetenv("QJOULE_TEST_HOST_CAPACITY");
  const auto real = compared_with(capacity(400, 380, std::nullopt, 0), 500.0);
  EXPECT_EQ(real.fp32_gflops_after, 380.0);  // without the knob: what was measured
}

TEST(HostCapacity, TheProbesRunOnThisCpuAndReadAPositiveRate) {
  const CpuPeak& peak = measured_peak(1);
  if (!peak.fp32_gflops) GTEST_SKIP() << peak.fp32_unavailable;
  const HostCapacityProbe probe(1);
  const HostCapacity h = probe.finish();
  EXPECT_EQ(h.threads, 1);
  ASSERT_TRUE(h.fp32_gflops_before && h.fp32_gflops_after);
  EXPECT_GT(*h.fp32_gflops_before, 0.0);
  EXPECT_GT(*h.fp32_gflops_after, 0.0);
  EXPECT_FALSE(h.fp32_peak_gflops);  // set by compared_with
  EXPECT_GE(h.contending_cores, 0.0);
}

TEST(HostCapacity, ADecoderProbeReadsTheBandwidthBesideItsWindowsAndTheBetterReadStands) {
  ::setenv("QJOULE_TEST_HOST_READ_GBPS", "41.5", 1);
  const HostCapacity h = HostCapacityProbe(1, /*read_bandwidth=*/true).finish();
  ::unsetenv("QJOULE_TEST_HOST_READ_GBPS");
  EXPECT_EQ(h.read_gb_per_s_before, 41.5);
  EXPECT_EQ(h.read_gb_per_s_after, 41.5);
  EXPECT_EQ(to_json(h)["read_gb_per_s_after"], 41.5);
  HostCapacity two;
  two.read_gb_per_s_before = 30.0;
  two.read_gb_per_s_after = 45.0;
  EXPECT_EQ(read_beside(two), 45.0);
  two.read_gb_per_s_after.reset();
  EXPECT_EQ(read_beside(two), 30.0);
  const HostCapacity no_read = HostCapacityProbe(1).finish();  // an encoder's: no read probe
  EXPECT_FALSE(no_read.read_gb_per_s_before || no_read.read_gb_per_s_after || read_beside(no_read));
  EXPECT_TRUE(to_json(no_read)["read_gb_per_s_before"].is_null());
  ::setenv("QJOULE_TEST_HOST_READ_GBPS", "fast", 1);
  EXPECT_THAT(error_of([] { HostCapacityProbe(1, true); }),
              HasSubstr("QJOULE_TEST_HOST_READ_GBPS=fast: expected a read bandwidth in GB/s, > 0 (a test knob)"));
  ::unsetenv("QJOULE_TEST_HOST_READ_GBPS");
}

TEST(HostCapacity, TheReadProbeRunsOnThisMachineAndReadsAPositiveRate) {
  const auto gb_per_s = read_rate_now(2);
  ASSERT_TRUE(gb_per_s);
  EXPECT_GT(*gb_per_s, 0.1);
  EXPECT_FALSE(read_rate_now(0));
}

}  // namespace
}  // namespace qjoule::limits

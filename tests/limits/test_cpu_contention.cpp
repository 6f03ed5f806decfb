// The contention of a limits measurement: the arithmetic on /proc's CPU times, and a probe that sees a
// process spinning beside it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "error_of.h"
#include "qjoule/limits/cpu_contention.h"

namespace qjoule::limits {
namespace {

using ::testing::HasSubstr;

CpuTimes times(double busy, double total, double self, int cpus) { return CpuTimes{busy, total, self, cpus}; }

TEST(CpuContention, OthersBeyondTheFreeCoresCount) {
  // 2 CPUs, 100 ticks of wall time each: 200 ticks in all.
  const CpuTimes before = times(0, 0, 0, 2);
  // The measurement's 2 threads took everything: no contention.
  EXPECT_DOUBLE_EQ(contending_cores(before, times(200, 200, 200, 2), 2), 0.0);
  // It took one core and others the other: with 2 threads that is 1 core of contention ...
  EXPECT_DOUBLE_EQ(contending_cores(before, times(200, 200, 100, 2), 2), 1.0);
  // ... with 1 thread the other core was free for them: none.
  EXPECT_DOUBLE_EQ(contending_cores(before, times(200, 200, 100, 2), 1), 0.0);
  // 1 thread, others took 1.5 cores of 2 (the hypervisor's steal counts as theirs): 0.5.
  EXPECT_DOUBLE_EQ(contending_cores(before, times(200, 200, 50, 2), 1), 0.5);
  // No time passed: nothing to say.
  EXPECT_DOUBLE_EQ(contending_cores(before, before, 2), 0.0);
}

TEST(CpuContention, ProcIsReadOnLinux) {
  const auto t = read_cpu_times();
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(t->cpus, 0);
  EXPECT_GE(t->machine_total, t->machine_busy);
  EXPECT_GT(t->machine_total, 0.0);
}

TEST(CpuContention, AProbeClaimingEveryCoreSeesAProcessSpinningBesideIt) {
  ::unsetenv("QJOULE_TEST_CONTENDED_CORES");  // ctest sets it for the other tests
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  ASSERT_GT(cpus, 0);
  const ContentionProbe probe(cpus);  // a measurement that wants every core ...
  const pid_t child = ::fork();       // ... while another process spins on one of them
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
    volatile unsigned long n = 0;
    while (std::chrono::steady_clock::now() < end) n = n + 1;
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_THAT(probe.verdict(), HasSubstr("other processes used"));
  EXPECT_THAT(probe.verdict(), HasSubstr(fmt::format("cores that its {} thread", cpus)));
}

TEST(CpuContention, TheTestKnobTakesANumberOfCoresOrSaysWhatItFound) {
  const ContentionProbe probe(1);
  ::setenv("QJOULE_TEST_CONTENDED_CORES", "0.5", 1);
  EXPECT_THAT(probe.verdict(), HasSubstr("other processes used 0.50 cores that its 1 thread needed"));
  ::setenv("QJOULE_TEST_CONTENDED_CORES", "lots", 1);
  EXPECT_THAT(test::error_of([&] { (void)probe.verdict(); }),
              HasSubstr("QJOULE_TEST_CONTENDED_CORES=lots: expected a number of cores >= 0 (a test knob)"));
  ::unsetenv("QJOULE_TEST_CONTENDED_CORES");
}

}  // namespace
}  // namespace qjoule::limits

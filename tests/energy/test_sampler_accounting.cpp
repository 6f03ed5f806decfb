// The sampler at a 1 ms period with both cores busy: every deadline is either taken or counted as
// missed, and late ones are counted. The test asserts the accounting, never a timing.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "qjoule/energy/energy_meter.h"
#include "scripted_sensors.h"

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;

TEST(EnergySamplerAccounting, EveryDeadlineIsTakenOrMissedUnderLoad) {
  auto sensor = std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 25.0);
  test::ScriptedSensor* raw = sensor.get();
  SensorDiscovery found;
  found.sensors.push_back(std::move(sensor));
  MeterOptions options;
  options.period = 1ms;
  EnergyMeter meter(std::move(found), options);

  std::atomic<bool> stop{false};
  std::vector<std::thread> burners;
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    burners.emplace_back([&] {
      volatile std::uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  }
  meter.start();
  Window w = meter.begin_window("loaded");
  std::this_thread::sleep_for(300ms);
  const Measurement m = meter.end_window(w);
  meter.stop();
  stop = true;
  for (auto& t : burners) t.join();

  const SamplerStats stats = meter.sampler_stats();
  ASSERT_GT(stats.stop_ns, stats.start_ns);
  const auto period_ns = static_cast<std::int64_t>(1'000'000);
  const auto deadlines = static_cast<std::uint64_t>((stats.stop_ns - stats.start_ns) / period_ns + 1);
  // The identity the sampler promises: expected = taken + missed = every deadline that passed.
  EXPECT_EQ(stats.ticks_expected, stats.ticks_taken + stats.ticks_missed);
  EXPECT_EQ(stats.ticks_expected, deadlines);
  EXPECT_LE(stats.ticks_late, stats.ticks_taken);
  EXPECT_GE(stats.ticks_taken, 1u);
  // Every read the sensor saw is a scheduled or a forced tick.
  EXPECT_EQ(static_cast<std::uint64_t>(raw->reads()), stats.ticks_taken + stats.forced_samples);
  // The window's own share obeys the same identity, and its coverage reflects what was missed.
  ASSERT_TRUE(m.sampler.has_value());
  EXPECT_EQ(m.sampler->ticks_expected, m.sampler->ticks_taken + m.sampler->ticks_missed);
  EXPECT_LE(m.sampler->ticks_expected, stats.ticks_expected);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_GE(e.coverage, 0.0);
  EXPECT_LE(e.coverage, 1.0);
  EXPECT_EQ(e.validity.low_coverage, e.coverage < kMinCoverage);
  // Energy from the counter does not depend on how many samples were taken.
  EXPECT_NEAR(*e.energy_j, 25.0 * m.duration_s, 25.0 * m.duration_s * 0.001);
  RecordProperty("ticks_taken", static_cast<int>(stats.ticks_taken));
  RecordProperty("ticks_missed", static_cast<int>(stats.ticks_missed));
  RecordProperty("ticks_late", static_cast<int>(stats.ticks_late));
  std::printf("1 ms sampler under load: %llu deadlines, %llu taken, %llu missed, %llu late\n",
              static_cast<unsigned long long>(stats.ticks_expected), static_cast<unsigned long long>(stats.ticks_taken),
              static_cast<unsigned long long>(stats.ticks_missed), static_cast<unsigned long long>(stats.ticks_late));
}

}  // namespace
}  // namespace qjoule::energy

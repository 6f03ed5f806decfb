// An external (wall) meter read from a pipe (cmd:COMMAND) and from a growing file (file:PATH).
#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/error.h"
#include "test_paths.h"

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

DiscoveryOptions meter_only(const std::string& spec) {
  DiscoveryOptions options;
  options.use_nvml = false;
  options.use_rapl = false;
  options.power_meter = spec;
  return options;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

TEST(EnergyExternalMeter, PipeReadingsAreIntegrated) {
  // A meter printing 42.5 W about every 10 ms with Unix timestamps.
  const std::string command = "while true; do echo \"$(date +%s.%N),42.5\"; sleep 0.01; done";
  MeterOptions options;
  options.meter_grace = 2000ms;
  EnergyMeter meter(discover_sensors(meter_only("cmd:" + command)), options);
  ASSERT_EQ(meter.sensors().size(), 1u);
  const SensorInfo& info = *meter.sensors()[0];
  EXPECT_EQ(info.id, "meter:cmd");
  EXPECT_EQ(info.scope, SensorScope::system);
  EXPECT_TRUE(info.self_timed);
  EXPECT_FALSE(info.counts_in_total);
  meter.start();
  std::this_thread::sleep_for(150ms);  // let the meter's first lines arrive
  Window w = meter.begin_window("wall");
  std::this_thread::sleep_for(400ms);
  const Measurement m = meter.end_window(w);
  meter.stop();
  const SensorEnergy& e = m.sensors.at(0);
  ASSERT_TRUE(e.energy_j.has_value()) << e.integrated_unavailable;
  EXPECT_EQ(e.energy_source, "power integral");
  EXPECT_NEAR(*e.energy_j, 42.5 * m.duration_s, 0.01 * 42.5 * m.duration_s);
  EXPECT_GT(e.samples, 5u);
  EXPECT_GE(e.coverage, 0.95);
  EXPECT_FALSE(e.validity.end_extrapolated);
  EXPECT_DOUBLE_EQ(*e.peak_power_w, 42.5);
  EXPECT_FALSE(m.total.energy_j.has_value()) << "a wall meter is not added to component totals";
}

TEST(EnergyExternalMeter, GrowingFileWithHeaderAndAMalformedLine) {
  const auto dir = test::temp_dir("meter-file");
  const std::string path = (dir / "wall.csv").string();
  {
    std::ofstream out(path);
    out << "timestamp_s,watts\n";
    const double start = unix_now() - 1.0;
    for (int i = 0; i <= 300; ++i) {  // 3 s of readings at 100 Hz, 20 W, 1 s in the past to 2 s ahead
      out << fmt::format("{:.6f},20\n", start + i * 0.01);
      if (i == 50) out << "garbage line\n";
    }
  }
  EnergyMeter meter(discover_sensors(meter_only("file:" + path)));
  meter.start();
  Window w = meter.begin_window("file");
  std::this_thread::sleep_for(300ms);
  const Measurement m = meter.end_window(w);
  meter.stop();
  const SensorEnergy& e = m.sensors.at(0);
  ASSERT_TRUE(e.energy_j.has_value());
  EXPECT_NEAR(*e.energy_j, 20.0 * m.duration_s, 0.01 * 20.0 * m.duration_s);
  EXPECT_THAT(e.notes, ::testing::Contains(HasSubstr("1 malformed line skipped (first: line 53: `garbage line`")));
}

TEST(EnergyExternalMeter, BadSpecificationsAreClearErrors) {
  try {
    discover_sensors(meter_only("http://meter"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected file:PATH or cmd:COMMAND"));
  }
  try {
    discover_sensors(meter_only("file:/nonexistent/wall.csv"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("file:/nonexistent/wall.csv: cannot open the file"));
  }
}

TEST(EnergyExternalMeter, NoMeterGivenIsListedAsAbsent) {
  DiscoveryOptions options;
  options.use_nvml = false;
  options.use_rapl = false;
  const SensorDiscovery found = discover_sensors(options);
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_EQ(found.absent[0].source, "power-meter");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("--power-meter"));
}

}  // namespace
}  // namespace qjoule::energy

// The perf `power` PMU route: discovery parses the PMU description and reports why an event could
// not be opened (here the PMU is a fake directory, so perf_event_open refuses it).
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "energy/perf_power_sensor.h"
#include "qjoule/energy/discovery.h"
#include "test_paths.h"

namespace qjoule::energy {
namespace {

using ::testing::HasSubstr;

TEST(EnergyPerfPower, MissingPmuExplainsWhy) {
  const auto found = discover_perf_power((test::temp_dir("perf-none") / "power").string());
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_EQ(found.absent[0].source, "rapl-perf");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("no perf `power` PMU"));
}

TEST(EnergyPerfPower, UnopenableEventsAreAbsencesNamingTheEvent) {
  const auto root = test::temp_dir("perf-fake");
  std::filesystem::create_directories(root / "events");
  std::ofstream(root / "type") << "4242\n";  // no such PMU type in the kernel
  std::ofstream(root / "cpumask") << "0\n";
  std::ofstream(root / "events" / "energy-pkg") << "event=0x02\n";
  std::ofstream(root / "events" / "energy-pkg.scale") << "2.3283064365386962890625e-10\n";
  std::ofstream(root / "events" / "energy-pkg.unit") << "Joules\n";
  const auto found = discover_perf_power(root.string());
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_EQ(found.absent[0].source, "rapl-perf:package-0");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("perf_event_open(power/energy-pkg/ on CPU 0) failed"));
}

TEST(EnergyPerfPower, TriedOnlyWhenSysfsGaveNothing) {
  DiscoveryOptions options;
  options.use_nvml = false;
  options.powercap_root = (test::temp_dir("perf-route") / "no-powercap").string();
  options.perf_power_root = (test::temp_dir("perf-route2") / "no-pmu").string();
  const SensorDiscovery found = discover_sensors(options);
  std::vector<std::string> sources;
  for (const auto& a : found.absent) sources.push_back(a.source);
  EXPECT_THAT(sources, ::testing::ElementsAre("rapl", "rapl-perf", "power-meter"));
}

}  // namespace
}  // namespace qjoule::energy

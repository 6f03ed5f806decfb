// RAPL through powercap sysfs, driven through the real code paths by a fake tree
// (QJOULE_POWERCAP_ROOT layout) whose counters a test thread advances at known wattages.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "energy/rapl_sensor.h"
#include "fake_powercap.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "test_paths.h"

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

const SensorEnergy& find(const Measurement& m, const std::string& id) {
  for (const SensorEnergy& e : m.sensors) {
    if (e.sensor_id == id) return e;
  }
  throw std::runtime_error("no sensor " + id);
}

// Two packages, a core and a DRAM sub-domain, psys, and an MMIO zone that repeats package 0.
// Package 0 runs at 50 W from 25 J in a 40 J range: its counter wraps 0.3 s after the start.
void build_tree(test::FakePowercap& tree) {
  tree.add_zone({"intel-rapl:0", "package-0", 50.0, 40'000'000, 25'000'000});
  tree.add_zone({"intel-rapl:0:0", "core", 20.0});
  tree.add_zone({"intel-rapl:0:1", "dram", 5.0});
  tree.add_zone({"intel-rapl:1", "package-1", 30.0});
  tree.add_zone({"intel-rapl:2", "psys", 120.0});
  tree.add_zone({"intel-rapl-mmio:0", "package-0", 50.0});
}

// Starts the tree's writer at 1 ms, measures one window of `duration` asleep through the real
// discovery and meter, and stops the writer.
Measurement measure_sleep(test::FakePowercap& tree, std::chrono::milliseconds duration) {
  tree.start(1ms);
  DiscoveryOptions options;
  options.use_nvml = false;
  options.powercap_root = tree.root().string();
  EnergyMeter meter(discover_sensors(options));
  meter.start();
  Window w = meter.begin_window("work");
  std::this_thread::sleep_for(duration);
  const Measurement m = meter.end_window(w);
  meter.stop();
  tree.stop();
  return m;
}

TEST(EnergyRaplSysfs, DiscoversEveryDomainWithoutDoubleCounting) {
  test::FakePowercap tree("rapl-discovery");
  build_tree(tree);
  const RaplDiscovery found = discover_rapl_sysfs(tree.root().string());
  ASSERT_EQ(found.sensors.size(), 5u);
  EXPECT_TRUE(found.absent.empty());
  std::map<std::string, const SensorInfo*> by_id;
  for (const auto& s : found.sensors) by_id[s->info().id] = &s->info();
  ASSERT_TRUE(by_id.count("rapl:package-0") && by_id.count("rapl:package-0/core") &&
              by_id.count("rapl:package-0/dram") && by_id.count("rapl:package-1") && by_id.count("rapl:psys"));
  EXPECT_EQ(by_id["rapl:package-0"]->scope, SensorScope::cpu_package);
  EXPECT_TRUE(by_id["rapl:package-0"]->counts_in_total);
  EXPECT_EQ(by_id["rapl:package-0"]->counter_range, 40'000'000u);
  EXPECT_DOUBLE_EQ(by_id["rapl:package-0"]->counter_unit_j, 1e-6);
  EXPECT_EQ(by_id["rapl:package-0/core"]->scope, SensorScope::cpu_core);
  EXPECT_FALSE(by_id["rapl:package-0/core"]->counts_in_total);
  EXPECT_EQ(by_id["rapl:package-0/core"]->nested_in, "rapl:package-0");
  EXPECT_EQ(by_id["rapl:package-0/dram"]->scope, SensorScope::dram);
  EXPECT_TRUE(by_id["rapl:package-0/dram"]->counts_in_total) << "DRAM is not part of the package";
  EXPECT_EQ(by_id["rapl:psys"]->scope, SensorScope::platform);
  EXPECT_FALSE(by_id["rapl:psys"]->counts_in_total);
  bool mmio_note = false;
  for (const auto& note : by_id["rapl:package-0"]->notes) mmio_note |= note.find("mmio") != std::string::npos;
  EXPECT_TRUE(mmio_note);
}

TEST(EnergyRaplSysfs, EnergyWithinOnePercentOfTheTruthAcrossAWrap) {
  test::FakePowercap tree("rapl-energy");
  build_tree(tree);
  const Measurement m = measure_sleep(tree, 1000ms);

  const double d = m.duration_s;
  // Within 1% of watts × duration, plus what the fake counters' staleness allows: their driver thread
  // writes every millisecond unless the host stalls it (the meter cannot read what was not written).
  const double stale = tree.max_write_gap_s();
  const auto near = [&](double watts) { return 0.01 * watts * d + watts * stale; };
  const SensorEnergy& p0 = find(m, "rapl:package-0");
  ASSERT_TRUE(p0.energy_j.has_value());
  EXPECT_NEAR(*p0.energy_j, 50.0 * d, near(50.0));
  EXPECT_EQ(p0.counter_wraps, 1u);
  EXPECT_TRUE(p0.validity.counter_wrapped);
  EXPECT_NEAR(*find(m, "rapl:package-1").energy_j, 30.0 * d, near(30.0));
  EXPECT_NEAR(*find(m, "rapl:package-0/dram").energy_j, 5.0 * d, near(5.0));
  EXPECT_NEAR(*find(m, "rapl:package-0/core").energy_j, 20.0 * d, near(20.0));
  EXPECT_NEAR(*find(m, "rapl:psys").energy_j, 120.0 * d, near(120.0));
  // Total: both packages and DRAM; the nested core and the psys superset are not added.
  ASSERT_TRUE(m.total.energy_j.has_value());
  EXPECT_NEAR(*m.total.energy_j, 85.0 * d, near(85.0));
  EXPECT_THAT(m.total.sensor_ids,
              ::testing::UnorderedElementsAre("rapl:package-0", "rapl:package-0/dram", "rapl:package-1"));
  EXPECT_FALSE(p0.integrated_energy_j.has_value());
  EXPECT_GT(p0.samples, 30u);
  EXPECT_GT(tree.writes(), 100u);
}

TEST(EnergyRaplSysfs, ACounterThatNeverMovesIsUnavailableNotZero) {
  // Some virtual machines expose RAPL whose counters never advance: 0 J would be a lie.
  test::FakePowercap tree("rapl-stuck");
  tree.add_zone({"intel-rapl:0", "package-0", 0.0});
  const Measurement m = measure_sleep(tree, 200ms);
  const SensorEnergy& p0 = find(m, "rapl:package-0");
  EXPECT_FALSE(p0.energy_j.has_value());
  EXPECT_FALSE(p0.peak_power_w.has_value());
  EXPECT_THAT(p0.energy_unavailable, HasSubstr("the counter never advanced during the window"));
  EXPECT_THAT(p0.energy_unavailable, HasSubstr("not counting"));
  EXPECT_FALSE(m.total.energy_j.has_value());
}

TEST(EnergyRaplSysfs, MissingRootExplainsWhy) {
  const RaplDiscovery found = discover_rapl_sysfs((test::temp_dir("rapl-none") / "absent").string());
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_EQ(found.absent[0].source, "rapl");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("does not exist"));
  EXPECT_TRUE(found.sensors.empty());
}

TEST(EnergyRaplSysfs, EmptyRootHasNoZones) {
  const RaplDiscovery found = discover_rapl_sysfs(test::temp_dir("rapl-empty").string());
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_THAT(found.absent[0].reason, HasSubstr("no RAPL zones"));
}

TEST(EnergyRaplSysfs, UnreadableCounterIsReportedNotFatal) {
  test::FakePowercap tree("rapl-dir");
  tree.add_zone({"intel-rapl:0", "package-0", 10.0});
  std::filesystem::remove(tree.energy_file("intel-rapl:0"));
  std::filesystem::create_directory(tree.energy_file("intel-rapl:0"));  // reading it: EISDIR
  const RaplDiscovery found = discover_rapl_sysfs(tree.root().string());
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_EQ(found.absent.size(), 1u);
  EXPECT_EQ(found.absent[0].source, "rapl:package-0");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("cannot read"));
}

TEST(EnergyRaplSysfs, MissingRangeIsANote) {
  test::FakePowercap tree("rapl-norange");
  test::FakeZone zone{"intel-rapl:0", "package-0", 10.0};
  zone.write_range = false;
  tree.add_zone(zone);
  const RaplDiscovery found = discover_rapl_sysfs(tree.root().string());
  ASSERT_EQ(found.sensors.size(), 1u);
  EXPECT_EQ(found.sensors[0]->info().counter_range, 0u);
  EXPECT_THAT(found.sensors[0]->info().notes, ::testing::Contains(HasSubstr("max_energy_range_uj")));
}

// Permission denied through the real open(2): the counter is mode 000. Root reads mode-000 files,
// so when this test runs as root the discovery runs in a child that has dropped to uid 65534.
TEST(EnergyRaplSysfs, PermissionDeniedSaysHowToGrantAccess) {
  test::FakePowercap tree("rapl-denied");
  tree.add_zone({"intel-rapl:0", "package-0", 10.0});
  const auto energy = tree.energy_file("intel-rapl:0");
  ASSERT_EQ(::chmod(energy.c_str(), 0), 0);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      ::_exit(3);
    }
    const RaplDiscovery found = discover_rapl_sysfs(tree.root().string());
    std::string text = found.absent.empty() ? "" : found.absent[0].reason;
    if (found.unreadable) text = "UNREADABLE " + text;
    (void)!::write(fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[512];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot drop root privileges here";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_THAT(text, HasSubstr("UNREADABLE"));
  EXPECT_THAT(text, HasSubstr("no permission to read " + energy.string()));
  EXPECT_THAT(text, HasSubstr("sudo chmod a+r"));
  EXPECT_THAT(text, HasSubstr("run qjoule as root"));
}

}  // namespace
}  // namespace qjoule::energy

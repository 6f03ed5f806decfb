// EnergyMeter and its sampler, driven by scripted sensors whose truth is known exactly.
#include <chrono>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/summary.h"
#include "qjoule/error.h"
#include "scripted_sensors.h"

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;
using test::ScriptedMeter;
using test::ScriptedSensor;
using ::testing::HasSubstr;

struct Rig {
  std::unique_ptr<EnergyMeter> meter;
  std::vector<ScriptedSensor*> sensors;
};

Rig make_rig(std::vector<std::unique_ptr<ScriptedSensor>> sensors, MeterOptions options = {},
             std::vector<SensorAbsence> absent = {}) {
  Rig rig;
  SensorDiscovery found;
  for (auto& s : sensors) {
    rig.sensors.push_back(s.get());
    found.sensors.push_back(std::move(s));
  }
  found.absent = std::move(absent);
  rig.meter = std::make_unique<EnergyMeter>(std::move(found), options);
  return rig;
}

std::unique_ptr<ScriptedSensor> counter_sensor(const std::string& id, double watts) {
  return std::make_unique<ScriptedSensor>(id, true, false, watts);
}

TEST(EnergyMeter, CounterWindowMatchesTheTruth) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 50.0));
  list.push_back(std::make_unique<ScriptedSensor>("nvml:gpu0", true, true, 200.0));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("work");
  std::this_thread::sleep_for(150ms);
  const Measurement m = rig.meter->end_window(w);

  ASSERT_EQ(m.sensors.size(), 2u);
  EXPECT_EQ(m.name, "work");
  EXPECT_GT(m.duration_s, 0.14);
  const SensorEnergy& cpu = m.sensors[0];
  ASSERT_TRUE(cpu.energy_j.has_value());
  EXPECT_EQ(cpu.energy_source, "counter");
  EXPECT_NEAR(*cpu.energy_j, 50.0 * m.duration_s, 50.0 * m.duration_s * 0.001);
  EXPECT_NEAR(*cpu.mean_power_w, 50.0, 0.05);
  EXPECT_FALSE(cpu.integrated_energy_j.has_value());
  EXPECT_THAT(cpu.integrated_unavailable, HasSubstr("no power readings"));
  ASSERT_TRUE(cpu.peak_power_w.has_value());  // derived from the counter over >= 10 ms
  EXPECT_NEAR(*cpu.peak_power_w, 50.0, 2.0);
  EXPECT_GE(cpu.samples, 5u);

  const SensorEnergy& gpu = m.sensors[1];
  ASSERT_TRUE(gpu.counter_energy_j && gpu.integrated_energy_j && gpu.relative_difference);
  EXPECT_NEAR(*gpu.integrated_energy_j, 200.0 * m.duration_s, 200.0 * m.duration_s * 0.001);
  EXPECT_NEAR(*gpu.relative_difference, 0.0, 0.002);
  EXPECT_DOUBLE_EQ(*gpu.peak_power_w, 200.0);
  EXPECT_EQ(gpu.peak_power_method, "largest power reading");

  ASSERT_TRUE(m.total.energy_j.has_value());
  EXPECT_NEAR(*m.total.energy_j, 250.0 * m.duration_s, 250.0 * m.duration_s * 0.001);
  ASSERT_TRUE(m.sampler.has_value());
  EXPECT_EQ(m.sampler->ticks_expected, m.sampler->ticks_taken + m.sampler->ticks_missed);
  EXPECT_FALSE(cpu.validity.end_extrapolated);  // a sample was taken right after the end
}

TEST(EnergyMeter, WrapsAreUnwrappedAndFlagged) {
  auto sensor = counter_sensor("rapl:package-0", 100.0);
  sensor->mutable_info().counter_range = 5'000'000;  // 5 J: wraps every 50 ms at 100 W
  sensor->start_units = 4'000'000;
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(std::move(sensor));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("wrapping");
  std::this_thread::sleep_for(120ms);
  const Measurement m = rig.meter->end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_GE(e.counter_wraps, 2u);
  EXPECT_TRUE(e.validity.counter_wrapped);
  EXPECT_TRUE(e.validity.valid()) << "a handled wrap does not invalidate the energy";
  EXPECT_NEAR(*e.energy_j, 100.0 * m.duration_s, 100.0 * m.duration_s * 0.001);
}

TEST(EnergyMeter, ShortWindowIsFlaggedAgainstTheUpdatePeriod) {
  auto sensor = counter_sensor("rapl:package-0", 10.0);
  // 1 s: a 10-period window is 10 s, so the 20 ms window is short however long the host stalls it.
  sensor->mutable_info().nominal_update_period_s = 1.0;
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(std::move(sensor));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("short");
  std::this_thread::sleep_for(20ms);
  const Measurement m = rig.meter->end_window(w);
  EXPECT_TRUE(m.sensors.at(0).validity.short_window);
  EXPECT_FALSE(m.sensors.at(0).validity.valid());
  EXPECT_THAT(m.sensors.at(0).validity.flags(), ::testing::Contains("short_window"));
}

TEST(EnergyMeter, AWindowShorterThanAPeriodStillResolves) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 10.0));
  MeterOptions options;
  options.period = 200ms;
  Rig rig = make_rig(std::move(list), options);
  rig.meter->start();
  Window w = rig.meter->begin_window("tiny");
  const Measurement m = rig.meter->end_window(w);
  EXPECT_LT(m.duration_s, 0.2);
  EXPECT_FALSE(m.sensors.at(0).validity.end_extrapolated);
  // The end boundary was resolved by a sample taken on request (or a deadline that fell there).
  EXPECT_GE(m.sampler->forced_samples + m.sampler->ticks_taken, 1u);
}

TEST(EnergyMeter, ReadErrorsAreCountedAndNeverHang) {
  auto sensor = counter_sensor("rapl:package-0", 10.0);
  sensor->fail_every = 2;
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(std::move(sensor));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("flaky");
  std::this_thread::sleep_for(60ms);
  const Measurement m = rig.meter->end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_GT(e.read_errors, 0u);
  EXPECT_TRUE(e.validity.read_errors);
  EXPECT_FALSE(e.validity.valid());
  const auto stats = rig.meter->sensor_stats();
  EXPECT_GT(stats.at(0).read_errors, 0u);
  EXPECT_FALSE(stats.at(0).first_error.empty());
}

TEST(EnergyMeter, IdleBaselineGivesNetEnergy) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 20.0));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  const IdleBaseline& idle = rig.meter->measure_idle(100ms);
  ASSERT_EQ(idle.sensors.size(), 1u);
  ASSERT_TRUE(idle.sensors[0].power_w.has_value());
  EXPECT_NEAR(*idle.sensors[0].power_w, 20.0, 0.05);
  EXPECT_FALSE(idle.window.idle_subtracted);

  rig.sensors[0]->watts = 70.0;
  std::this_thread::sleep_for(20ms);
  Window w = rig.meter->begin_window("busy");
  std::this_thread::sleep_for(100ms);
  const Measurement m = rig.meter->end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_TRUE(m.idle_subtracted);
  ASSERT_TRUE(e.net_energy_j && e.idle_power_w);
  EXPECT_NEAR(*e.net_energy_j, 50.0 * m.duration_s, 70.0 * m.duration_s * 0.005);
  ASSERT_TRUE(m.total.net_energy_j.has_value());
}

TEST(EnergyMeter, WithoutIdleBaselineNetIsUnavailableWithReason) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 20.0));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("x");
  const Measurement m = rig.meter->end_window(w);
  EXPECT_FALSE(m.sensors.at(0).net_energy_j.has_value());
  EXPECT_THAT(m.sensors.at(0).net_unavailable, HasSubstr("--idle"));
}

TEST(EnergyMeter, NestedDomainsAreNotAddedTwice) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 40.0));
  auto core = counter_sensor("rapl:package-0/core", 30.0);
  core->mutable_info().counts_in_total = false;
  core->mutable_info().nested_in = "rapl:package-0";
  list.push_back(std::move(core));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window w = rig.meter->begin_window("x");
  std::this_thread::sleep_for(50ms);
  const Measurement m = rig.meter->end_window(w);
  ASSERT_EQ(m.total.sensor_ids, std::vector<std::string>{"rapl:package-0"});
  EXPECT_NEAR(*m.total.energy_j, 40.0 * m.duration_s, 40.0 * m.duration_s * 0.001);
}

TEST(EnergyMeter, SynchronizeHooksRunAroundEveryTimestamp) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("nvml:gpu0", 100.0));
  Rig rig = make_rig(std::move(list));
  int calls = 0;
  rig.meter->add_synchronize_hook("cuda", [&] { ++calls; });
  rig.meter->start();
  Window w = rig.meter->begin_window("kernel");
  EXPECT_EQ(calls, 1);
  const Measurement m = rig.meter->end_window(w);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(m.synchronized_with, std::vector<std::string>{"cuda"});
  // A removed hook no longer runs, nor is it listed.
  EXPECT_EQ(rig.meter->remove_synchronize_hook("cuda"), 1u);
  EXPECT_EQ(rig.meter->remove_synchronize_hook("cuda"), 0u);
  Window w2 = rig.meter->begin_window("cpu");
  const Measurement m2 = rig.meter->end_window(w2);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(m2.synchronized_with.empty());
}

TEST(EnergyMeter, WindowsNestAndOverlap) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 10.0));
  Rig rig = make_rig(std::move(list));
  rig.meter->start();
  Window outer = rig.meter->begin_window("outer");
  std::this_thread::sleep_for(30ms);
  Window inner = rig.meter->begin_window("inner");
  std::this_thread::sleep_for(30ms);
  const Measurement mi = rig.meter->end_window(inner);
  std::this_thread::sleep_for(30ms);
  const Measurement mo = rig.meter->end_window(outer);
  EXPECT_LT(*mi.sensors[0].energy_j, *mo.sensors[0].energy_j);
  EXPECT_NEAR(*mi.sensors[0].energy_j, 10.0 * mi.duration_s, 10.0 * mi.duration_s * 0.001);
  EXPECT_NEAR(*mo.sensors[0].energy_j, 10.0 * mo.duration_s, 10.0 * mo.duration_s * 0.001);
}

TEST(EnergyMeter, MisuseIsAClearError) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 10.0));
  Rig rig = make_rig(std::move(list));
  EXPECT_THROW(
      {
        try {
          rig.meter->begin_window("early");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("before start()"));
          throw;
        }
      },
      Error);
  rig.meter->start();
  Window w = rig.meter->begin_window("once");
  rig.meter->end_window(w);
  EXPECT_THROW(rig.meter->end_window(w), Error);

  std::vector<Window> open;
  for (int i = 0; i < 64; ++i) open.push_back(rig.meter->begin_window("many"));
  try {
    rig.meter->begin_window("one too many");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("64 windows are open at once"));
  }
  open.clear();  // dropping the handles cancels the windows
  Window again = rig.meter->begin_window("after");
  rig.meter->end_window(again);
}

TEST(EnergyMeter, NoSensorMeansUnavailableWithReasonsNeverZero) {
  Rig rig =
      make_rig({}, {}, {{"nvml", "cannot load libnvidia-ml.so.1"}, {"rapl", "/sys/class/powercap does not exist"}});
  rig.meter->start();
  Window w = rig.meter->begin_window("nothing");
  std::this_thread::sleep_for(5ms);
  const Measurement m = rig.meter->end_window(w);
  EXPECT_TRUE(m.sensors.empty());
  EXPECT_FALSE(m.total.energy_j.has_value());
  EXPECT_THAT(m.total.unavailable, HasSubstr("no energy sensor"));
  EXPECT_THAT(m.total.unavailable, HasSubstr("cannot load libnvidia-ml.so.1"));
  EXPECT_FALSE(m.sampler.has_value());
  const nlohmann::json j = to_json(m);
  EXPECT_EQ(j["status"], "unavailable");
  EXPECT_TRUE(j["total"]["energy_j"].is_null());
  EXPECT_EQ(j["unavailable_sensors"].size(), 2u);
  const std::string text = format_measurement(m);
  EXPECT_THAT(text, HasSubstr("unavailable"));
  EXPECT_THAT(text, HasSubstr("/sys/class/powercap does not exist"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr(" 0.000 J")));
}

TEST(EnergyMeter, EstimateOnlyWhenAskedAndAlwaysLabelled) {
  MeterOptions options;
  options.estimate = parse_energy_estimate("cpu-tdp=65");
  Rig rig = make_rig({}, options, {{"rapl", "absent"}});
  rig.meter->start();
  Window w = rig.meter->begin_window("busy");
  const auto until = std::chrono::steady_clock::now() + 120ms;
  volatile double sink = 0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
  const Measurement m = rig.meter->end_window(w);
  ASSERT_TRUE(m.estimate.has_value()) << m.estimate_unavailable;
  EXPECT_GT(m.estimate->energy_j, 0.0);
  EXPECT_LE(m.estimate->energy_j, 65.0 * m.duration_s + 1e-9);
  EXPECT_THAT(m.estimate->method, HasSubstr("cpu-tdp: 65 W"));
  EXPECT_FALSE(m.total.energy_j.has_value()) << "an estimate never stands in for a measurement";
  const nlohmann::json j = to_json(m);
  EXPECT_EQ(j["estimate"]["estimated"], true);
  EXPECT_THAT(format_measurement(m), HasSubstr("estimated"));

  Rig plain = make_rig({}, {}, {});
  plain.meter->start();
  Window v = plain.meter->begin_window("x");
  EXPECT_FALSE(plain.meter->end_window(v).estimate.has_value());
}

TEST(EnergyEstimate, ParsesOnlyCpuTdp) {
  EXPECT_DOUBLE_EQ(parse_energy_estimate("cpu-tdp=65").tdp_w, 65.0);
  EXPECT_DOUBLE_EQ(parse_energy_estimate("cpu-tdp=12.5").tdp_w, 12.5);
  try {
    parse_energy_estimate("gpu-tdp=300");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("expected cpu-tdp=WATTS"));
  }
  EXPECT_THROW(parse_energy_estimate("cpu-tdp=-1"), Error);
  EXPECT_THROW(parse_energy_estimate("cpu-tdp=lots"), Error);
}

TEST(EnergyMeter, SelfTimedMeterIntegratesPowerAndFlagsHoles) {
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::vector<ScriptedMeter::Point> points;
  // 100 W every 10 ms for 400 ms, except a 150 ms hole in the middle.
  for (std::int64_t t = -20'000'000; t <= 400'000'000; t += 10'000'000) {
    if (t > 150'000'000 && t < 300'000'000) continue;
    points.push_back({now + t, 100.0});
  }
  SensorDiscovery found;
  found.sensors.push_back(std::make_unique<ScriptedMeter>(points, 0.05));
  EnergyMeter meter(std::move(found));
  meter.start();
  Window w = meter.begin_window("meter");
  std::this_thread::sleep_for(360ms);
  const Measurement m = meter.end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_EQ(e.energy_source, "power integral");
  EXPECT_THAT(e.counter_unavailable, HasSubstr("no energy counter"));
  EXPECT_LT(e.coverage, 0.95);
  EXPECT_TRUE(e.validity.low_coverage);
  // Energy is what was covered: never scaled up to hide the hole.
  EXPECT_LT(*e.energy_j, 100.0 * m.duration_s * 0.9);
  EXPECT_FALSE(e.counts_in_total);
}

TEST(EnergyMeter, SilentMeterGivesUnavailableAfterTheGrace) {
  SensorDiscovery found;
  found.sensors.push_back(std::make_unique<ScriptedMeter>(std::vector<ScriptedMeter::Point>{}, 0.05));
  MeterOptions options;
  options.meter_grace = 30ms;
  EnergyMeter meter(std::move(found), options);
  meter.start();
  Window w = meter.begin_window("silent");
  std::this_thread::sleep_for(20ms);
  const Measurement m = meter.end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_FALSE(e.energy_j.has_value());
  EXPECT_TRUE(e.validity.end_extrapolated);
  EXPECT_TRUE(e.validity.low_coverage);
  EXPECT_TRUE(to_json(m)["sensors"][0]["energy_j"].is_null());
}

TEST(EnergyMeter, TraceKeepsEveryReadingInOrder) {
  std::vector<std::unique_ptr<ScriptedSensor>> list;
  list.push_back(counter_sensor("rapl:package-0", 10.0));
  list.push_back(std::make_unique<ScriptedSensor>("nvml:gpu0", false, true, 30.0));
  MeterOptions options;
  options.period = 2ms;
  options.trace_capacity = 4096;
  Rig rig = make_rig(std::move(list), options);
  rig.meter->start();
  std::this_thread::sleep_for(40ms);
  rig.meter->stop();
  std::vector<TraceSample> samples;
  rig.meter->drain_trace([&](const TraceSample& s) { samples.push_back(s); });
  const auto stats = rig.meter->sensor_stats();
  ASSERT_EQ(samples.size(), stats[0].samples + stats[1].samples);
  std::int64_t last[2] = {0, 0};
  for (const TraceSample& s : samples) {
    EXPECT_GT(s.time_ns, last[s.sensor]);
    last[s.sensor] = s.time_ns;
    EXPECT_EQ(s.energy_j.has_value(), s.sensor == 0);
    EXPECT_EQ(s.power_w.has_value(), s.sensor == 1);
  }
  EXPECT_EQ(rig.meter->drain_trace([](const TraceSample&) {}), 0u);
}

}  // namespace
}  // namespace qjoule::energy

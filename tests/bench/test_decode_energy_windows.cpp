// A decoder run's decode phase in back-to-back energy windows (src/bench/energy_windows.h): the split of a
// fixed count of repetitions, the windows' spread and note, an estimate a window could not give, and on the
// runner with a scripted sensor: the note beside the whole phase's energy, and a window too short for its
// sensor's updates giving no number, only the reason (window_energy.h, for every window).
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bench/energy_windows.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/energy/energy_meter.h"
#include "scripted_sensors.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

using ::testing::HasSubstr;

TEST(DecodeEnergyWindows, AFixedCountSplitsEvenlyAndWhole) {
  for (std::size_t count : {1, 2, 3, 7, 10}) {
    for (std::size_t windows : {1, 2, 3}) {
      if (windows > count) continue;
      std::size_t total = 0;
      for (std::size_t w = 0; w < windows; ++w) {
        const std::size_t n = detail::repetitions_of_window(count, windows, w);
        EXPECT_GE(n, count / windows);
        EXPECT_LE(n, count / windows + 1);
        total += n;
      }
      EXPECT_EQ(total, count) << count << " over " << windows;
    }
  }
}

TEST(DecodeEnergyWindows, TheSpreadIsTheRangeOverTheMedianOfWhatWasMeasured) {
  using W = detail::WindowPerToken;
  EXPECT_FALSE(detail::windows_spread({W{40.0, ""}}));
  EXPECT_FALSE(detail::windows_spread({W{40.0, ""}, W{std::nullopt, "no sensor"}}));
  EXPECT_DOUBLE_EQ(*detail::windows_spread({W{40.0, ""}, W{42.0, ""}, W{41.0, ""}}), 2.0 / 41.0);
  EXPECT_DOUBLE_EQ(*detail::windows_spread({W{40.0, ""}, W{44.0, ""}}), 4.0 / 42.0);
  EXPECT_EQ(detail::windows_note({W{40.0, ""}, W{std::nullopt, "x"}, W{42.0, ""}}, 2.0),
            "decode energy in 3 windows of >= 2 s each: 40, unavailable, 42 mJ/token (spread 4.9% of the median)");
  EXPECT_EQ(detail::window_per_token(detail::WindowEnergy{5.0, 4.0, ""}, 100.0).mj_per_token, 40.0);
  EXPECT_EQ(detail::window_per_token(detail::WindowEnergy{std::nullopt, std::nullopt, "no sensor"}, 100.0).unavailable,
            "no sensor");
}

// Asked for an estimate that a window could not give (shorter than /proc/stat's 10 ms tick): the reason says so
// beside the sensors' absence.
TEST(DecodeEnergyWindows, AnEstimateTheWindowCouldNotGiveSaysWhy) {
  energy::Measurement m;
  m.name = "run:decode";
  m.total.unavailable = "no energy sensor: rapl: none here";
  m.estimate_unavailable = "no CPU time passed in /proc/stat during the window (shorter than its 10 ms tick)";
  EXPECT_THAT(detail::window_energy(m).unavailable,
              HasSubstr("no energy sensor: rapl: none here; estimate: no CPU time passed in /proc/stat"));
  EXPECT_THAT(detail::window_energy(m, m.total, false).unavailable, ::testing::Not(HasSubstr("estimate")));
}

RunConfig windowed_decoder_config() {
  RunConfig c;
  c.model = (test::fixtures_dir() / "decoders" / "tiny-llama").string();
  c.precision = "fp32";
  c.batch = 1;
  c.seq = 8;
  c.threads = 1;
  return c;
}

// A started meter (sampled every 1 ms) over one scripted 25 W package whose counter counts `unit_j` joules.
std::unique_ptr<energy::EnergyMeter> scripted_package_meter(double unit_j) {
  energy::SensorDiscovery found;
  auto sensor = std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 25.0);
  sensor->mutable_info().counter_unit_j = unit_j;
  found.sensors.push_back(std::move(sensor));
  energy::MeterOptions meter_options;
  meter_options.period = std::chrono::milliseconds(1);
  auto meter = std::make_unique<energy::EnergyMeter>(std::move(found), meter_options);
  meter->start();
  return meter;
}

// A scripted 25 W package: the decode phase's energy is its whole window's, and the note gives the three
// windows' mJ/token.
TEST(DecodeEnergyWindows, TheRecordKeepsTheWholePhaseAndNotesEachWindow) {
  const auto meter = scripted_package_meter(1e-6);
  BenchOptions options;
  options.warmup = 1;
  options.decode_tokens = 4;
  options.min_time_s = 0.05;
  const RunRecord r = BenchRunner(options, *meter).run(windowed_decoder_config());
  ASSERT_EQ(r.status, "ok") << r.error;
  ASSERT_TRUE(r.decode_energy_j) << r.decode_energy_unavailable;
  EXPECT_GE(*r.decode_iters, 3u);
  EXPECT_GE(r.decode_energy_window.at("duration_s").get<double>(), 3 * 0.05);
  EXPECT_DOUBLE_EQ(*r.decode_mj_per_token, *r.decode_energy_j * 1e3 / (static_cast<double>(*r.decode_iters) * 4));
  int notes = 0;
  for (const auto& note : r.notes) notes += note.starts_with("decode energy in 3 windows of >= 0.05 s each: ") ? 1 : 0;
  EXPECT_EQ(notes, 1) << ::testing::PrintToString(r.notes);
}

// A counter that moves once a joule (every 40 ms at 25 W) and three repetitions a phase: the prefill and decode
// windows span fewer than 10 of its updates, so their energy is no number, only why.
TEST(DecodeEnergyWindows, AWindowTooShortForItsCounterIsUnavailableWithTheReason) {
  const auto meter = scripted_package_meter(1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the counter's updates observed
  BenchOptions options;
  options.warmup = 1;
  options.iters = 3;
  options.decode_tokens = 4;
  const RunRecord r = BenchRunner(options, *meter).run(windowed_decoder_config());
  ASSERT_EQ(r.status, "ok") << r.error;
  EXPECT_FALSE(r.decode_energy_j);
  EXPECT_FALSE(r.decode_mj_per_token);
  EXPECT_THAT(r.decode_energy_unavailable, HasSubstr("too short for its counter"));
  EXPECT_THAT(r.decode_energy_unavailable, HasSubstr("rapl:package-0"));
  EXPECT_THAT(r.decode_energy_unavailable, HasSubstr(":decode`"));
  // The prefill window alike (every window: window_energy.h).
  EXPECT_FALSE(r.energy_j);
  EXPECT_FALSE(r.prefill_mj_per_token);
  EXPECT_THAT(r.energy_unavailable, HasSubstr("too short for its counter"));
  EXPECT_THAT(r.energy_unavailable, HasSubstr(":prefill`"));
}

}  // namespace
}  // namespace qjoule::bench

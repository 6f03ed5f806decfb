// `qjoule energy` and `qjoule sensors` run as subprocesses of the test.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_powercap.h"
#include "run_qjoule.h"
#include "test_paths.h"

namespace qjoule::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EnergyCli, NoSensorExitsZeroAndSaysUnavailableWithReasons) {
  const auto env = no_sensor_env(temp_dir("cli-nosensor").string());
  const ProcessResult r = run_qjoule({"energy", "--", "sleep", "1"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("`sleep 1` exited with status 0"));
  EXPECT_THAT(r.err, HasSubstr("energy: unavailable"));
  EXPECT_THAT(r.err, HasSubstr("nvml"));
  EXPECT_THAT(r.err, HasSubstr("no NVIDIA driver"));
  EXPECT_THAT(r.err, HasSubstr("rapl"));
  EXPECT_THAT(r.err, HasSubstr("no RAPL zones"));
  EXPECT_THAT(r.err, HasSubstr("rapl-perf"));
  EXPECT_THAT(r.err, Not(HasSubstr("0.000 J")));
  EXPECT_THAT(r.err, Not(HasSubstr("measuring idle power"))) << "no idle wait without a sensor";
}

TEST(EnergyCli, ThisMachineAsItIs) {
  const ProcessResult r = run_qjoule({"energy", "--idle", "0", "--", "sleep", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("exited with status 0"));
  // Either real sensors measured something, or every absent one is explained.
  EXPECT_TRUE(r.err.find("energy in `sleep 1`") != std::string::npos ||
              r.err.find("energy: unavailable") != std::string::npos)
      << r.err;
}

TEST(EnergyCli, ForwardsExitCodesAndSignals) {
  const auto env = no_sensor_env(temp_dir("cli-exit").string());
  EXPECT_EQ(run_qjoule({"energy", "--", "sh", "-c", "exit 3"}, env).exit_code, 3);
  const ProcessResult killed = run_qjoule({"energy", "--", "sh", "-c", "kill -TERM $$"}, env);
  EXPECT_EQ(killed.exit_code, 143);
  EXPECT_THAT(killed.err, HasSubstr("killed by signal 15 (SIGTERM)"));
  const ProcessResult missing = run_qjoule({"energy", "--", "/nonexistent/program"}, env);
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.err, HasSubstr("cannot run `/nonexistent/program`: No such file or directory"));
}

TEST(EnergyCli, MeasuresAFakeMachineAndWritesJsonAndTrace) {
  const auto dir = temp_dir("cli-fake");
  FakePowercap tree(dir.filename().string());
  tree.add_zone({"intel-rapl:0", "package-0", 40.0});
  tree.add_zone({"intel-rapl:0:0", "dram", 6.0});
  tree.start(1ms);
  const std::string json = (dir / "run.json").string();
  const std::string trace = (dir / "run.csv").string();
  const ProcessResult r =
      run_qjoule({"energy", "--idle", "0.3", "--interval", "5", "--json", json, "--trace", trace, "--", "sleep", "0.5"},
                 {{"QJOULE_POWERCAP_ROOT", tree.root().string()},
                  {"QJOULE_NVML_LIB", QJOULE_FAKE_NVML},
                  {"FAKE_NVML_WATTS", "150"},
                  {"QJOULE_PERF_POWER_ROOT", (dir / "none").string()}});
  tree.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("measuring idle power"));
  EXPECT_THAT(r.err, HasSubstr("rapl:package-0"));
  EXPECT_THAT(r.err, HasSubstr("nvml:gpu0"));
  EXPECT_THAT(r.err, HasSubstr("idle baseline over"));
  EXPECT_THAT(r.err, HasSubstr("deadlines sampled"));

  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["command"], nlohmann::json({"sleep", "0.5"}));
  const auto& m = j["measurement"];
  EXPECT_EQ(m["status"], "measured");
  const double d = m["duration_s"];
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& s : m["sensors"]) by_id[s["id"]] = s;
  ASSERT_TRUE(by_id.count("rapl:package-0") && by_id.count("rapl:package-0/dram") && by_id.count("nvml:gpu0"));
  // The fake counters are written by a thread of this test process every 1 ms; on a loaded CI
  // machine (ctest -j2 on 2 cores) that thread can lag by tens of milliseconds, and the lag shows
  // at the edges of each window. The budgets below allow 15 ms of lag at a window edge for the
  // energies and 40 ms for the idle-subtracted net energy (which compounds the 0.3 s idle window's
  // edges, scaled by d / 0.3); the sampler's exactness is tested with a simulated clock elsewhere.
  EXPECT_NEAR(by_id["rapl:package-0"]["energy_j"].get<double>(), 40.0 * d, 40.0 * 0.015);
  EXPECT_NEAR(by_id["rapl:package-0/dram"]["energy_j"].get<double>(), 6.0 * d, 6.0 * 0.015);
  EXPECT_NEAR(by_id["nvml:gpu0"]["energy_j"].get<double>(), 150.0 * d, 150.0 * 0.015);
  // The GPU's state at both ends of the window; RAPL domains have none.
  EXPECT_EQ(by_id["nvml:gpu0"]["device_state"]["start"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(by_id["nvml:gpu0"]["device_state"]["end"]["persistence_mode"], true);
  EXPECT_FALSE(by_id["rapl:package-0"].contains("device_state"));
  EXPECT_TRUE(m["idle_subtracted"].get<bool>());
  EXPECT_NEAR(by_id["rapl:package-0"]["net_energy_j"].get<double>(), 0.0, 40.0 * 0.040 * (1.0 + d / 0.3));
  EXPECT_NEAR(m["total"]["energy_j"].get<double>(), 196.0 * d, 196.0 * 0.015);
  EXPECT_FALSE(j["idle_baseline"].is_null());
  EXPECT_EQ(j["sampler"]["ticks_expected"].get<std::uint64_t>(),
            j["sampler"]["ticks_taken"].get<std::uint64_t>() + j["sampler"]["ticks_missed"].get<std::uint64_t>());

  const std::string csv = read_file(trace);
  EXPECT_EQ(csv.rfind("time_s,sensor,energy_j,power_w\n", 0), 0u);
  EXPECT_THAT(csv, HasSubstr(",rapl:package-0,"));
  EXPECT_THAT(csv, HasSubstr(",nvml:gpu0,"));
  EXPECT_GT(std::count(csv.begin(), csv.end(), '\n'), 100);
}

TEST(EnergyCli, BenchMeasuresAFakeMachineAndKeepsTraces) {
  const auto dir = temp_dir("cli-bench-fake");
  FakePowercap tree(dir.filename().string());
  tree.add_zone({"intel-rapl:0", "package-0", 40.0});
  tree.start(1ms);
  const auto out = dir / "out";
  const ProcessResult r = run_qjoule(
      {"bench", "--model", (fixtures_dir() / "tiny-bert").string(), "--precisions", "fp32,int8", "--seq", "16",
       "--batch", "2", "--threads", "1", "--min-time", "0.3", "--idle", "0.3", "--trace", "--out", out.string()},
      {{"QJOULE_POWERCAP_ROOT", tree.root().string()},
       {"QJOULE_NVML_LIB", (dir / "none.so").string()},
       {"QJOULE_PERF_POWER_ROOT", (dir / "none").string()}});
  tree.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("measuring idle power"));
  std::istringstream lines(read_file(out / "results.jsonl"));
  std::string line;
  int records = 0;
  while (std::getline(lines, line)) {
    const auto rec = nlohmann::json::parse(line);
    ++records;
    ASSERT_TRUE(rec["energy_j"].is_number()) << rec["energy_unavailable"];
    const double seconds = rec["energy_window"]["duration_s"].get<double>();
    EXPECT_NEAR(rec["energy_j"].get<double>(), 40.0 * seconds, 40.0 * 0.015);  // lag budget as above
    EXPECT_TRUE(rec["energy_j_per_inference"].is_number());
    EXPECT_TRUE(rec["energy_net_j"].is_number());
    EXPECT_TRUE(rec["energy_unavailable"].is_null());
    EXPECT_THAT(rec["energy_method"].get<std::string>(), HasSubstr("rapl:package-0"));
    const auto trace = out / "traces" / (rec["run_name"].get<std::string>() + ".csv");
    const std::string csv = read_file(trace);
    EXPECT_EQ(csv.rfind("time_s,sensor,energy_j,power_w\n", 0), 0u) << trace;
    EXPECT_GT(std::count(csv.begin(), csv.end(), '\n'), 20) << "10 ms readings over >= 0.3 s";
  }
  EXPECT_EQ(records, 2);
}

TEST(EnergyCli, EstimateIsLabelled) {
  const auto env = no_sensor_env(temp_dir("cli-estimate").string());
  const ProcessResult r = run_qjoule({"energy", "--energy-estimate", "cpu-tdp=65", "--", "sh", "-c",
                                      "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"},
                                     env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("energy: unavailable"));
  EXPECT_THAT(r.err, HasSubstr("estimate"));
  EXPECT_THAT(r.err, HasSubstr("estimated"));
  const ProcessResult bad = run_qjoule({"energy", "--energy-estimate", "watts=3", "--", "true"}, env);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("--energy-estimate watts=3: expected cpu-tdp=WATTS"));
}

TEST(EnergyCli, HelpTeaches) {
  const ProcessResult r = run_qjoule({"energy", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* text : {"--interval", "--idle", "--json", "--trace", "--gpu", "--power-meter", "--energy-estimate",
                           "Examples", "qjoule energy -- sleep 1", "unavailable"}) {
    EXPECT_THAT(r.out, HasSubstr(text));
  }
  EXPECT_THAT(r.out, HasSubstr("10"));  // the interval's default
}

TEST(EnergyCli, MissingCommandIsAnError) {
  const ProcessResult r = run_qjoule({"energy"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("command is required"));
}

TEST(EnergyCliSensors, ExplainsEveryAbsence) {
  const auto env = no_sensor_env(temp_dir("cli-sensors").string());
  const ProcessResult r = run_qjoule({"sensors"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no energy sensor found"));
  EXPECT_THAT(r.out, HasSubstr("nvml"));
  EXPECT_THAT(r.out, HasSubstr("cannot load"));
  EXPECT_THAT(r.out, HasSubstr("rapl"));
  EXPECT_THAT(r.out, HasSubstr("power-meter"));
}

TEST(EnergyCliSensors, ThisMachineAsItIs) {
  const ProcessResult r = run_qjoule({"sensors", "--probe", "50"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.find("not found:") != std::string::npos || r.out.find("found") != std::string::npos);
}

TEST(EnergyCliSensors, ListsFakeSensorsWithObservedUpdatePeriods) {
  const auto dir = temp_dir("cli-sensors-fake");
  FakePowercap tree(dir.filename().string());
  tree.add_zone({"intel-rapl:0", "package-0", 40.0});
  tree.add_zone({"intel-rapl:0:0", "core", 20.0});
  tree.start(1ms);
  const std::string json = (dir / "sensors.json").string();
  const ProcessResult r =
      run_qjoule({"sensors", "--probe", "150", "--json", json}, {{"QJOULE_POWERCAP_ROOT", tree.root().string()},
                                                                 {"QJOULE_NVML_LIB", QJOULE_FAKE_NVML},
                                                                 {"FAKE_NVML_ENERGY_UPDATE_MS", "20"}});
  tree.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("3 energy sensors found"));
  EXPECT_THAT(r.out, HasSubstr("rapl:package-0/core"));
  EXPECT_THAT(r.out, HasSubstr("part of rapl:package-0"));
  EXPECT_THAT(r.out, HasSubstr("NVML_FI_DEV_POWER_INSTANT"));
  EXPECT_THAT(r.out, HasSubstr("observed"));
  const nlohmann::json j = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(j["sensors"].size(), 3u);
  for (const auto& s : j["sensors"]) {
    if (s["id"] == "nvml:gpu0") {
      ASSERT_FALSE(s["observed_update_period_s"].is_null());
      EXPECT_GT(s["observed_update_period_s"].get<double>(), 0.010);
    }
  }
}

// The permission message through the whole CLI: energy_uj is mode 000 and qjoule runs as an
// ordinary user (dropped from root in the child when the tests run as root).
TEST(EnergyCliSensors, PermissionDeniedMessage) {
  const auto dir = temp_dir("cli-denied");
  FakePowercap tree(dir.filename().string());
  tree.add_zone({"intel-rapl:0", "package-0", 40.0});
  ASSERT_EQ(::chmod(tree.energy_file("intel-rapl:0").c_str(), 0), 0);
  const ProcessResult r = run_qjoule({"sensors", "--probe", "0"},
                                     {{"QJOULE_POWERCAP_ROOT", tree.root().string()},
                                      {"QJOULE_NVML_LIB", (dir / "none").string()},
                                      {"QJOULE_PERF_POWER_ROOT", (dir / "none").string()}},
                                     /*as_nobody=*/true);
  if (r.exit_code == 201) GTEST_SKIP() << "cannot drop root privileges here";
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no permission to read " + tree.energy_file("intel-rapl:0").string()));
  EXPECT_THAT(r.out, HasSubstr("sudo chmod a+r"));
}

}  // namespace
}  // namespace qjoule::test

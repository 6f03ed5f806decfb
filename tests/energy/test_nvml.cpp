// NVML through a fake libnvidia-ml built by the tests and loaded via QJOULE_NVML_LIB: the real
// dlopen/dlsym/nvmlInit code path, counter deltas, power readings, and graceful degradation.
#include <dlfcn.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "energy/nvml_sensor.h"
#include "qjoule/energy/discovery.h"
#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/job_gpus.h"
#include "qjoule/energy/measurement.h"
#include "qjoule/energy/summary.h"
#include "qjoule/error.h"

namespace qjoule::energy {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Fake library controls are environment variables; each test runs in its own process (ctest).
class EnergyNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"FAKE_NVML_GPUS", "FAKE_NVML_WATTS", "FAKE_NVML_ENERGY_UPDATE_MS", "FAKE_NVML_ENERGY", "FAKE_NVML_FIELDS",
          "FAKE_NVML_ARCH", "FAKE_NVML_INIT_ERROR", "FAKE_NVML_THROTTLE", "FAKE_NVML_TEMPERATURE",
          "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
      ::unsetenv(name);
    }
    ::setenv("QJOULE_NVML_LIB", QJOULE_FAKE_NVML, 1);
  }
  static DiscoveryOptions nvml_only() {
    DiscoveryOptions options;
    options.use_rapl = false;
    return options;
  }
};

template <typename Fn>
Fn fake_function(void* handle, const char* name) {
  void* address = ::dlsym(handle, name);
  Fn fn = nullptr;
  std::memcpy(&fn, &address, sizeof fn);
  return fn;
}

TEST_F(EnergyNvml, OneSensorPerGpuWithCounterAndInstantPower) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  ::setenv("FAKE_NVML_WATTS", "100,250", 1);
  SensorDiscovery found = discover_sensors(nvml_only());
  ASSERT_EQ(found.sensors.size(), 2u);
  const SensorInfo& gpu0 = found.sensors[0]->info();
  EXPECT_EQ(gpu0.id, "nvml:gpu0");
  EXPECT_EQ(found.sensors[1]->info().id, "nvml:gpu1");
  EXPECT_EQ(gpu0.scope, SensorScope::gpu);
  EXPECT_EQ(gpu0.source, "nvml");
  EXPECT_EQ(gpu0.description, "GPU 0: Fake NVIDIA H100 0 (GPU-fake-0, whole GPU)");
  EXPECT_TRUE(gpu0.has_counter);
  EXPECT_DOUBLE_EQ(gpu0.counter_unit_j, 1e-3);
  EXPECT_TRUE(gpu0.has_power);
  EXPECT_THAT(gpu0.power_method, HasSubstr("NVML_FI_DEV_POWER_INSTANT"));
  EXPECT_TRUE(gpu0.counts_in_total);
}

TEST_F(EnergyNvml, CounterDeltasAndPowerReadingsAreRight) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  ::setenv("FAKE_NVML_WATTS", "100,250", 1);
  EnergyMeter meter(discover_sensors(nvml_only()));
  meter.start();
  Window w = meter.begin_window("kernel");
  std::this_thread::sleep_for(300ms);
  const Measurement m = meter.end_window(w);
  meter.stop();
  ASSERT_EQ(m.sensors.size(), 2u);
  // The fake's counter follows the wall clock, so a read that the scheduler delays at a window edge
  // (ctest -j2 on 2 busy cores: several ms) moves the energy by watts × delay: 3% of the 300 ms window
  // allows 9 ms. A read held back longer than the meter's gap limit leaves a hole that is neither
  // integrated nor covered (seen: 64 ms of the 300 under ctest -j2), so the power integral is checked
  // over the time its readings covered. The exact arithmetic is tested with scripted sensors
  // (test_energy_meter).
  constexpr double kEdgeLag = 0.03;
  const double watts[] = {100.0, 250.0};
  for (std::size_t i = 0; i < 2; ++i) {
    const SensorEnergy& e = m.sensors[i];
    const double truth = watts[i] * m.duration_s;
    ASSERT_TRUE(e.counter_energy_j && e.integrated_energy_j && e.relative_difference) << e.sensor_id;
    EXPECT_NEAR(*e.counter_energy_j, truth, kEdgeLag * truth) << e.sensor_id;
    // A hole beyond half the window would be a sampler that stopped, not one held back; and the meter
    // flags whatever it did not cover (validity.low_coverage below kMinCoverage).
    EXPECT_GE(e.coverage, 0.5) << e.sensor_id;
    EXPECT_EQ(e.validity.low_coverage, e.coverage < kMinCoverage) << e.sensor_id;
    EXPECT_NEAR(*e.integrated_energy_j, truth * e.coverage, kEdgeLag * truth) << e.sensor_id;
    EXPECT_NEAR(*e.relative_difference, e.coverage - 1.0, kEdgeLag) << e.sensor_id;
    EXPECT_EQ(e.energy_source, "counter");
    EXPECT_DOUBLE_EQ(*e.peak_power_w, watts[i]);
    EXPECT_NEAR(*e.mean_power_w, watts[i], kEdgeLag * watts[i]);
  }
  EXPECT_NEAR(*m.total.energy_j, 350.0 * m.duration_s, kEdgeLag * 350.0 * m.duration_s);
}

TEST_F(EnergyNvml, GpuOptionSelectsAndRejectsMissingIndices) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  DiscoveryOptions options = nvml_only();
  options.gpus = {1};
  SensorDiscovery found = discover_sensors(options);
  ASSERT_EQ(found.sensors.size(), 1u);
  EXPECT_EQ(found.sensors[0]->info().id, "nvml:gpu1");
  options.gpus = {5};
  try {
    discover_sensors(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--gpu 5: this machine has 2 NVIDIA GPUs (indices 0 to 1)"));
  }
}

// The job's GPUs only: CUDA_VISIBLE_DEVICES (indices, GPU and MIG UUIDs), then SLURM_STEP_GPUS,
// SLURM_JOB_GPUS; a shared node's other GPUs are never measured.
TEST_F(EnergyNvml, OnlyTheJobsGpusAreMeasured) {
  ::setenv("FAKE_NVML_GPUS", "4", 1);
  const auto ids = [] {
    std::vector<std::string> out;
    for (const auto& s : discover_sensors(nvml_only()).sensors) out.push_back(s->info().id);
    return out;
  };
  const auto nvml_absent = [](const SensorDiscovery& d) {  // (the power meter's absence is not this test's)
    std::vector<SensorAbsence> out;
    for (const auto& a : d.absent)
      if (a.source.rfind("nvml", 0) == 0) out.push_back(a);
    return out;
  };
  EXPECT_EQ(ids().size(), 4u) << "no variable: every GPU";

  ::setenv("SLURM_JOB_GPUS", "2,3", 1);
  EXPECT_EQ(ids(), (std::vector<std::string>{"nvml:gpu2", "nvml:gpu3"}));
  ::setenv("SLURM_STEP_GPUS", "3", 1);  // the step's GPUs, within the job's
  EXPECT_EQ(ids(), (std::vector<std::string>{"nvml:gpu3"}));

  ::setenv("CUDA_VISIBLE_DEVICES", "1", 1);  // what CUDA sees decides
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  auto found = discover_sensors(nvml_only());
  ASSERT_EQ(found.sensors.size(), 1u);
  EXPECT_EQ(found.sensors[0]->info().id, "nvml:gpu1");
  EXPECT_THAT(found.sensors[0]->info().notes,
              ::testing::Contains("measured as this job's GPU (CUDA_VISIBLE_DEVICES=1)"));
  ::unsetenv("CUDA_DEVICE_ORDER");  // CUDA's default order: the index may not be NVML's, and it says so
  found = discover_sensors(nvml_only());
  ASSERT_EQ(found.sensors.size(), 1u);
  EXPECT_THAT(
      found.sensors[0]->info().notes,
      ::testing::Contains(HasSubstr("index taken as NVML's, which is CUDA's only with CUDA_DEVICE_ORDER=PCI_BUS_ID")));

  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-2", 1);
  EXPECT_EQ(ids(), (std::vector<std::string>{"nvml:gpu2"}));

  ::setenv("CUDA_VISIBLE_DEVICES", "MIG-fake-1", 1);
  found = discover_sensors(nvml_only());
  auto absent = nvml_absent(found);
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_EQ(absent.size(), 1u);
  EXPECT_EQ(absent[0].source, "nvml:MIG-fake-1");
  EXPECT_EQ(absent[0].reason,
            "CUDA_VISIBLE_DEVICES=MIG-fake-1: MIG-fake-1 is a MIG instance; NVML reads energy "
            "and power of whole GPUs only, so its energy is unavailable");

  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-0,7,GPU-nope", 1);
  found = discover_sensors(nvml_only());
  absent = nvml_absent(found);
  ASSERT_EQ(found.sensors.size(), 1u);
  EXPECT_EQ(found.sensors[0]->info().id, "nvml:gpu0");
  ASSERT_EQ(absent.size(), 2u);
  EXPECT_THAT(absent[0].reason, HasSubstr("CUDA_VISIBLE_DEVICES=GPU-fake-0,7,GPU-nope: no GPU 7 here (NVML sees 4)"));
  EXPECT_THAT(absent[1].reason, HasSubstr("NVML does not know GPU-nope: Not Found"));

  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  found = discover_sensors(nvml_only());
  absent = nvml_absent(found);
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_EQ(absent.size(), 1u);
  EXPECT_EQ(absent[0].reason, "CUDA_VISIBLE_DEVICES= gives this job no GPU");

  DiscoveryOptions explicit_gpu = nvml_only();  // --gpu still chooses for itself
  explicit_gpu.gpus = {3};
  ASSERT_EQ(discover_sensors(explicit_gpu).sensors.size(), 1u);

  ::setenv("QJOULE_NVML_LIB", QJOULE_FAKE_NVML_OLD, 1);
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-fake-0", 1);
  const auto old = nvml_absent(discover_sensors(nvml_only()));
  ASSERT_EQ(old.size(), 1u);
  EXPECT_THAT(old[0].reason, HasSubstr("lacks nvmlDeviceGetHandleByUUID (driver too old) to find GPU-fake-0"));
}

TEST(EnergyJobGpus, ReadTheFirstVariableSetInOrder) {
  const auto with = [](std::map<std::string, std::string> env) {
    return job_gpus_from_environment([env = std::move(env)](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(with({}), std::nullopt);
  auto job = with({{"SLURM_JOB_GPUS", "0, 2"}});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->variable, "SLURM_JOB_GPUS");
  EXPECT_EQ(job->entries, (std::vector<std::string>{"0", "2"}));
  EXPECT_FALSE(job->indices_in_cuda_order);
  job = with({{"SLURM_JOB_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "GPU-a,MIG-b"}});
  EXPECT_EQ(job->variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(job->entries, (std::vector<std::string>{"GPU-a", "MIG-b"}));
  EXPECT_TRUE(job->indices_in_cuda_order);
  EXPECT_TRUE(with({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}})->entries.empty());
  EXPECT_FALSE(with({{"CUDA_VISIBLE_DEVICES", "0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}})->indices_in_cuda_order);
}

TEST_F(EnergyNvml, PciBusIdGivesTheNvmlIndex) {
  ::setenv("FAKE_NVML_GPUS", "3", 1);
  std::string why;
  // cudaDeviceGetPCIBusId's form (4-digit domain) and NVML's own (8-digit) both resolve.
  EXPECT_EQ(nvml_index_of_pci_bus_id("0000:11:00.0", why), std::optional<unsigned>(1)) << why;
  EXPECT_EQ(nvml_index_of_pci_bus_id("00000000:12:00.0", why), std::optional<unsigned>(2)) << why;
  EXPECT_EQ(nvml_index_of_pci_bus_id("0000:3B:00.0", why), std::nullopt);
  EXPECT_THAT(why, HasSubstr("nvmlDeviceGetHandleByPciBusId(0000:3B:00.0) failed: Not Found"));
  ::setenv("QJOULE_NVML_LIB", QJOULE_FAKE_NVML_OLD, 1);
  EXPECT_EQ(nvml_index_of_pci_bus_id("0000:10:00.0", why), std::nullopt);
  EXPECT_THAT(why, HasSubstr("lacks nvmlDeviceGetHandleByPciBusId or nvmlDeviceGetIndex"));
  ::setenv("QJOULE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  EXPECT_EQ(nvml_index_of_pci_bus_id("0000:10:00.0", why), std::nullopt);
  EXPECT_THAT(why, HasSubstr("no NVIDIA driver is installed"));
}

TEST_F(EnergyNvml, UnsupportedEnergyCounterFallsBackToPowerWithAReason) {
  ::setenv("FAKE_NVML_ENERGY", "unsupported", 1);
  ::setenv("FAKE_NVML_WATTS", "80", 1);
  EnergyMeter meter(discover_sensors(nvml_only()));
  const auto sensors = meter.sensors();
  ASSERT_EQ(sensors.size(), 1u);
  EXPECT_FALSE(sensors[0]->has_counter);
  EXPECT_THAT(sensors[0]->notes, ::testing::Contains(HasSubstr("not supported on this GPU")));
  meter.start();
  Window w = meter.begin_window("x");
  std::this_thread::sleep_for(200ms);
  const Measurement m = meter.end_window(w);
  const SensorEnergy& e = m.sensors.at(0);
  EXPECT_FALSE(e.counter_energy_j.has_value());
  EXPECT_THAT(e.counter_unavailable, HasSubstr("not supported on this GPU"));
  EXPECT_EQ(e.energy_source, "power integral");
  EXPECT_NEAR(*e.energy_j, 80.0 * m.duration_s, 0.01 * 80.0 * m.duration_s);
}

TEST_F(EnergyNvml, UnsupportedInstantFieldUsesPowerUsageAndSaysItIsAveraged) {
  ::setenv("FAKE_NVML_FIELDS", "unsupported", 1);
  ::setenv("FAKE_NVML_ARCH", "9", 1);  // Hopper: nvmlDeviceGetPowerUsage is a 1-s average
  SensorDiscovery found = discover_sensors(nvml_only());
  ASSERT_EQ(found.sensors.size(), 1u);
  auto* sensor = dynamic_cast<NvmlSensor*>(found.sensors[0].get());
  ASSERT_NE(sensor, nullptr);
  EXPECT_EQ(sensor->power_route(), NvmlPowerRoute::power_usage);
  EXPECT_THAT(sensor->info().power_method, HasSubstr("1-second average"));
  EXPECT_THAT(sensor->info().notes, ::testing::Contains(HasSubstr("NVML_FI_DEV_POWER_INSTANT")));

  found = SensorDiscovery{};           // the last sensor goes: nvmlShutdown, and the fake reads its settings again
  ::setenv("FAKE_NVML_ARCH", "5", 1);  // Volta: instantaneous
  found = discover_sensors(nvml_only());
  EXPECT_THAT(found.sensors.at(0)->info().power_method, HasSubstr("instantaneous"));
}

TEST_F(EnergyNvml, OldDriverWithoutFunctionsDegradesWithNotes) {
  ::setenv("QJOULE_NVML_LIB", QJOULE_FAKE_NVML_OLD, 1);
  ::setenv("FAKE_NVML_WATTS", "60", 1);
  SensorDiscovery found = discover_sensors(nvml_only());
  ASSERT_EQ(found.sensors.size(), 1u);
  const SensorInfo& info = found.sensors[0]->info();
  EXPECT_FALSE(info.has_counter);
  EXPECT_TRUE(info.has_power);
  EXPECT_THAT(info.notes, ::testing::Contains(HasSubstr("lacks nvmlDeviceGetTotalEnergyConsumption")));
  EXPECT_THAT(info.notes, ::testing::Contains(HasSubstr("lacks nvmlDeviceGetFieldValues")));
  EXPECT_THAT(info.power_method, HasSubstr("architecture unknown"));
}

// Each window records every GPU's state at its start and end: clocks, temperature, power limit,
// persistence mode and clock-event ("throttle") reasons; a field NVML cannot give is null with why.
TEST_F(EnergyNvml, EachWindowRecordsTheGpuStateAtItsStartAndEnd) {
  ::setenv("FAKE_NVML_GPUS", "2", 1);
  ::setenv("FAKE_NVML_THROTTLE", "0x24", 1);  // sw_power_cap + sw_thermal_slowdown
  EnergyMeter meter(discover_sensors(nvml_only()));
  meter.start();
  Window w = meter.begin_window("stateful");
  std::this_thread::sleep_for(250ms);
  const Measurement m = meter.end_window(w);
  ASSERT_EQ(m.sensors.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const SensorEnergy& e = m.sensors[static_cast<std::size_t>(i)];
    ASSERT_TRUE(e.state_start && e.state_end) << e.sensor_id;
    EXPECT_EQ(e.state_start->sm_clock_mhz, 1980u - static_cast<unsigned>(i));
    EXPECT_EQ(e.state_start->memory_clock_mhz, 2619u);
    EXPECT_EQ(e.state_start->power_limit_w, 700.0);
    EXPECT_EQ(e.state_start->persistence_mode, true);
    EXPECT_EQ(e.state_start->clocks_event_reasons, 0x24u);
    EXPECT_EQ(e.state_start->clocks_event_reason_names,
              (std::vector<std::string>{"sw_power_cap", "sw_thermal_slowdown"}));
    ASSERT_TRUE(e.state_start->temperature_c && e.state_end->temperature_c);
    EXPECT_GT(*e.state_end->temperature_c, *e.state_start->temperature_c) << "the fake warms 1 °C per 100 ms";
    EXPECT_TRUE(e.state_start->unavailable.empty());
  }
  const nlohmann::json j = to_json(m);
  const auto& state = j["sensors"][0]["device_state"];
  EXPECT_EQ(state["start"]["sm_clock_mhz"], 1980);
  EXPECT_EQ(state["end"]["power_limit_w"], 700.0);
  EXPECT_EQ(state["end"]["persistence_mode"], true);
  EXPECT_EQ(state["end"]["clocks_event_reason_names"], nlohmann::json({"sw_power_cap", "sw_thermal_slowdown"}));
}

// A window whose GPU clocks a power cap or a thermal slowdown held down says so, with the state then;
// idleness alone is no warning.
TEST_F(EnergyNvml, ClocksHeldDownByACapOrHeatAreAWarning) {
  ::setenv("FAKE_NVML_THROTTLE", "0x24", 1);
  EnergyMeter meter(discover_sensors(nvml_only()));
  meter.start();
  Window w = meter.begin_window("capped");
  std::this_thread::sleep_for(50ms);
  const Measurement m = meter.end_window(w);
  const auto warnings = clock_limit_warnings(m);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("nvml:gpu0: clocks limited by sw_power_cap, sw_thermal_slowdown at the "
                                     "window's start and end (SM 1980 MHz, "));
  EXPECT_THAT(warnings[0], HasSubstr("°C, power limit 700 W)"));
  EXPECT_TRUE(clock_limit_warnings(m, {"nvml:gpu7"}).empty()) << "only the sensors asked for";
  EXPECT_THAT(format_measurement(m), HasSubstr("  warning: nvml:gpu0: clocks limited by sw_power_cap"));

  Measurement idle = m;
  idle.sensors[0].state_start->clocks_event_reason_names = {"gpu_idle"};
  idle.sensors[0].state_end->clocks_event_reason_names = {"gpu_idle"};
  EXPECT_TRUE(clock_limit_warnings(idle).empty());
  idle.sensors[0].state_end->clocks_event_reason_names = {"gpu_idle", "hw_slowdown"};
  EXPECT_THAT(clock_limit_warnings(idle).at(0), HasSubstr("clocks limited by hw_slowdown at the window's end"));
}

TEST_F(EnergyNvml, AStateFieldNvmlCannotGiveIsNullWithTheReason) {
  ::setenv("FAKE_NVML_TEMPERATURE", "unsupported", 1);
  SensorDiscovery found = discover_sensors(nvml_only());
  const auto state = found.sensors.at(0)->device_state();
  ASSERT_TRUE(state);
  EXPECT_FALSE(state->temperature_c);
  EXPECT_THAT(state->unavailable,
              ::testing::ElementsAre("temperature_c: nvmlDeviceGetTemperature: Not Supported (NVML error 3)"));
  EXPECT_TRUE(state->sm_clock_mhz);
  // An old driver without the state functions: every field null, each saying which function is missing.
  found = SensorDiscovery{};
  ::setenv("QJOULE_NVML_LIB", QJOULE_FAKE_NVML_OLD, 1);
  found = discover_sensors(nvml_only());
  const auto old = found.sensors.at(0)->device_state();
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->sm_clock_mhz || old->memory_clock_mhz || old->temperature_c || old->power_limit_w ||
               old->persistence_mode || old->clocks_event_reasons);
  EXPECT_EQ(old->unavailable.size(), 6u);
  EXPECT_THAT(old->unavailable, ::testing::Contains("power_limit_w: this NVML library has no "
                                                    "nvmlDeviceGetEnforcedPowerLimit"));
}

TEST_F(EnergyNvml, ObservedUpdatePeriodAndShortWindowFlag) {
  ::setenv("FAKE_NVML_ENERGY_UPDATE_MS", "25", 1);
  MeterOptions options;
  options.period = 2ms;
  EnergyMeter meter(discover_sensors(nvml_only()), options);
  meter.start();
  std::this_thread::sleep_for(300ms);
  Window w = meter.begin_window("short");
  std::this_thread::sleep_for(50ms);
  const Measurement m = meter.end_window(w);
  const auto stats = meter.sensor_stats();
  ASSERT_TRUE(stats.at(0).observed_update_period_s.has_value());
  EXPECT_FALSE(stats.at(0).update_period_is_upper_bound);
  EXPECT_GT(*stats[0].observed_update_period_s, 0.015);
  EXPECT_LT(*stats[0].observed_update_period_s, 0.040);
  EXPECT_TRUE(m.sensors.at(0).validity.short_window) << "50 ms is under 10 periods of 25 ms";
}

TEST_F(EnergyNvml, InitFailureIsAnAbsenceWithTheReason) {
  ::setenv("FAKE_NVML_INIT_ERROR", "9", 1);
  const SensorDiscovery found = discover_sensors(nvml_only());
  EXPECT_TRUE(found.sensors.empty());
  ASSERT_FALSE(found.absent.empty());
  EXPECT_EQ(found.absent[0].source, "nvml");
  EXPECT_THAT(found.absent[0].reason, HasSubstr("driver is not loaded"));
}

TEST_F(EnergyNvml, NoGpuIsAnAbsence) {
  ::setenv("FAKE_NVML_GPUS", "0", 1);
  const SensorDiscovery found = discover_sensors(nvml_only());
  EXPECT_TRUE(found.sensors.empty());
  EXPECT_THAT(found.absent.at(0).reason, HasSubstr("no NVIDIA GPU"));
}

TEST_F(EnergyNvml, MissingLibraryIsAnAbsence) {
  ::setenv("QJOULE_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
  const SensorDiscovery found = discover_sensors(nvml_only());
  EXPECT_TRUE(found.sensors.empty());
  EXPECT_THAT(found.absent.at(0).reason, HasSubstr("cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(found.absent.at(0).reason, HasSubstr("no NVIDIA driver"));
}

TEST_F(EnergyNvml, ALibraryThatIsNotNvmlIsRejected) {
  ::setenv("QJOULE_NVML_LIB", "libm.so.6", 1);
  const SensorDiscovery found = discover_sensors(nvml_only());
  EXPECT_TRUE(found.sensors.empty());
  EXPECT_THAT(found.absent.at(0).reason, HasSubstr("not a usable NVML library"));
}

TEST_F(EnergyNvml, ShutdownWhenTheLastSensorIsGone) {
  void* handle = ::dlopen(QJOULE_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);  // keeps the fake's state alive
  ASSERT_NE(handle, nullptr);
  const auto active = fake_function<int (*)()>(handle, "fake_nvml_active_inits");
  const auto field_calls = fake_function<long (*)()>(handle, "fake_nvml_field_calls");
  ASSERT_NE(active, nullptr);
  {
    EnergyMeter meter(discover_sensors(nvml_only()));
    EXPECT_EQ(active(), 1);
    meter.start();
    std::this_thread::sleep_for(30ms);
    meter.stop();
    EXPECT_GT(field_calls(), 1) << "power comes from the instant field";
  }
  EXPECT_EQ(active(), 0) << "nvmlShutdown after the last sensor";
  ::dlclose(handle);
}

}  // namespace
}  // namespace qjoule::energy

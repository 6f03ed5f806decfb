// One source of energy or power readings (a RAPL domain, a GPU, a wall meter) behind one interface.
// The sampler thread polls every Sensor; the sensor says what it measures and how.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qjoule::energy {

// What part of the machine a sensor measures.
enum class SensorScope {
  gpu,          // one GPU board (NVML)
  cpu_package,  // one CPU package/socket (RAPL package domain)
  cpu_core,     // the cores of one package (RAPL core/PP0; nested in the package)
  cpu_uncore,   // the uncore/iGPU of one package (RAPL uncore/PP1; nested in the package)
  dram,         // the DRAM attached to one package (RAPL dram; not part of the package)
  platform,     // the whole SoC platform (RAPL psys; includes the packages)
  system,       // the whole machine at the wall (external meter)
};

std::string_view scope_name(SensorScope scope);  // "gpu", "cpu_package", ...

// Static description of a sensor, fixed at discovery.
struct SensorInfo {
  std::string id;           // stable, unique: "rapl:package-0", "rapl:package-0/dram", "nvml:gpu0"
  std::string source;       // "rapl-sysfs", "rapl-perf", "nvml", "external-meter", or a test's name
  std::string description;  // for people: "CPU package 0 (powercap intel-rapl:0)"
  SensorScope scope = SensorScope::system;

  // Cumulative energy counter (preferred: nothing is lost between samples).
  bool has_counter = false;
  double counter_unit_j = 0.0;      // joules per counter unit (1e-6 for powercap, 1e-3 for NVML)
  std::uint64_t counter_range = 0;  // counter wraps to 0 after this many units; 0 = never wraps

  // Instantaneous (or averaged) power readings.
  bool has_power = false;
  double power_resolution_w = 0.0;  // 0 = unknown
  std::string power_method;         // how power is read, e.g. "instant (NVML field 186)"

  // How often the device refreshes its value, as documented; 0 = unknown. The meter also
  // observes the real period (SensorStats::observed_update_period_s).
  double nominal_update_period_s = 0.0;

  // Readings that carry their own timestamps and arrive asynchronously (an external meter). A gap
  // between two such readings longer than max_gap_s counts as uncovered time.
  bool self_timed = false;
  double max_gap_s = 0.0;

  // Totals add only sensors with counts_in_total; a nested domain (RAPL core inside its package)
  // names its enclosing sensor in nested_in and is reported but never added twice.
  bool counts_in_total = true;
  std::string nested_in;

  std::vector<std::string> notes;  // caveats found at discovery ("power is a 1-s average", ...)
};

// One reading. Times are steady_clock (CLOCK_MONOTONIC) nanoseconds.
struct SensorReading {
  std::int64_t time_ns = 0;
  std::uint64_t counter = 0;  // raw counter value, in SensorInfo::counter_unit_j units
  double power_w = 0.0;
  bool has_counter = false;
  bool has_power = false;
  bool ok = true;  // false: the read failed; error_code says why (errno, or an NVML code)
  int error_code = 0;
};

// The operating state of a device at one instant (a GPU board: clocks, temperature, power limit,
// persistence mode, clock-event reasons), read at the start and at the end of each energy window, so
// that a result says under what conditions its joules were spent. A field that could not be read is
// std::nullopt, with the reason in `unavailable` ("temperature_c: Not Supported (NVML error 3)").
struct DeviceState {
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> memory_clock_mhz;
  std::optional<unsigned> temperature_c;
  std::optional<double> power_limit_w;
  std::optional<bool> persistence_mode;
  std::optional<std::uint64_t> clocks_event_reasons;   // NVML's bitmask ("throttle reasons")
  std::vector<std::string> clocks_event_reason_names;  // its set bits, e.g. {"sw_power_cap"}
  std::vector<std::string> unavailable;
};

class Sensor {
 public:
  virtual ~Sensor() = default;
  Sensor() = default;
  Sensor(const Sensor&) = delete;
  Sensor& operator=(const Sensor&) = delete;

  virtual const SensorInfo& info() const noexcept = 0;

  // Called from the sampler thread only. `now_ns` is the time just before the call. Writes up to
  // out.size() readings and returns how many. A polled sensor writes exactly one (time_ns =
  // now_ns, ok=false on failure); a self-timed sensor writes the readings that arrived, oldest
  // first, each with its own time, never one later than now_ns. Must not allocate, throw or block
  // longer than the device's own read latency.
  virtual std::size_t read(std::int64_t now_ns, std::span<SensorReading> out) noexcept = 0;

  // Words for an error_code this sensor returned (called outside the sampler loop).
  virtual std::string describe_error(int error_code) const;

  // Problems seen while reading that are not per-reading errors (malformed meter lines, ...).
  // Called outside the sampler loop.
  virtual std::vector<std::string> problems() const { return {}; }

  // The device's operating state now, for sensors of a device that has one (a GPU); std::nullopt for
  // the others. Called outside the sampler loop, at the start and end of each window.
  virtual std::optional<DeviceState> device_state() const { return std::nullopt; }
};

}  // namespace qjoule::energy

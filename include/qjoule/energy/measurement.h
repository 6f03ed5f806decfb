// What one measurement window found: duration, energy per sensor (from counters and from power
// integration), mean/peak power, samples, coverage and validity flags. Missing values are
// std::nullopt with the reason beside them, never 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/energy/discovery.h"
#include "qjoule/energy/estimate.h"
#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

// Why a number may not mean what it seems. See docs/energy.md ("Validity flags").
struct Validity {
  bool short_window = false;      // window shorter than 10 update periods of the sensor
  bool low_coverage = false;      // samples cover under 95% of the window
  bool counter_wrapped = false;   // the counter wrapped in the window (handled; listed for audit)
  bool counter_reset = false;     // the counter went backwards with no wrap range (driver reload)
  bool read_errors = false;       // some reads failed in the window
  bool end_extrapolated = false;  // a self-timed meter sent nothing after the window ended
  bool from_counter = false;      // the energy comes from a counter (holes in sampling lose nothing)

  // True unless a flag that makes the energy doubtful is set. counter_wrapped alone keeps it true;
  // low_coverage only makes energy from power integration doubtful (a counter loses nothing
  // between samples; only the peak power may have been missed).
  bool valid() const {
    return !short_window && !(low_coverage && !from_counter) && !counter_reset && !read_errors && !end_extrapolated;
  }
  std::vector<std::string> flags() const;  // names of the set flags, e.g. {"short_window"}
};

inline constexpr double kMinCoverage = 0.95;
inline constexpr double kMinUpdatePeriodsPerWindow = 10.0;

struct SensorEnergy {
  std::string sensor_id;
  std::string description;
  SensorScope scope = SensorScope::system;
  bool counts_in_total = true;
  std::string nested_in;

  // Best energy for this sensor: the counter delta when there is a counter, else the power
  // integral. energy_source says which ("counter" or "power integral").
  std::optional<double> energy_j;
  std::string energy_source;
  std::string energy_unavailable;  // why energy_j is absent

  std::optional<double> counter_energy_j;     // from counter deltas (wraps handled)
  std::string counter_unavailable;            // why counter_energy_j is absent
  std::optional<double> integrated_energy_j;  // trapezoid integration of power samples
  std::string integrated_unavailable;
  std::optional<double> relative_difference;  // (integrated - counter) / counter, when both exist

  std::optional<double> idle_power_w;  // from the idle baseline
  std::optional<double> net_energy_j;  // energy_j - idle_power_w * duration
  std::string net_unavailable;

  std::optional<double> mean_power_w;  // energy_j / duration
  std::optional<double> peak_power_w;  // largest power sample (or counter-derived power)
  std::string peak_power_method;       // "power samples" or "counter delta over >= N ms"
  std::string peak_unavailable;

  std::uint64_t samples = 0;  // readings taken inside the window
  double coverage = 0.0;      // fraction of the window covered by samples (0..1)
  std::uint64_t counter_wraps = 0;
  std::uint64_t read_errors = 0;
  std::optional<double> update_period_s;  // the period the short-window test used
  Validity validity;
  std::vector<std::string> notes;  // sensor caveats and problems, for the record
  // The device's operating state at the window's start and end (GPU boards; see DeviceState).
  std::optional<DeviceState> state_start, state_end;
};

// Sum over the sensors that count in totals (nested domains and whole-system meters excluded).
struct EnergyTotal {
  std::optional<double> energy_j;
  std::optional<double> net_energy_j;
  std::vector<std::string> sensor_ids;  // what was added
  bool valid = false;                   // every added sensor valid
  std::string unavailable;              // why energy_j is absent
};

// What the sampler did during the window.
struct SamplerWindowStats {
  double period_s = 0.0;
  std::uint64_t ticks_expected = 0;  // sampling deadlines that fell in the window
  std::uint64_t ticks_taken = 0;     // deadlines served
  std::uint64_t ticks_missed = 0;    // deadlines skipped because the sampler was a period late
  std::uint64_t ticks_late = 0;      // served, but more than half a period after the deadline
  std::uint64_t forced_samples = 0;  // extra samples taken at window boundaries
};

struct Measurement {
  std::string name;
  double duration_s = 0.0;
  std::int64_t start_ns = 0;  // steady_clock
  std::int64_t end_ns = 0;
  std::vector<std::string> synchronized_with;  // device hooks run before each timestamp

  std::vector<SensorEnergy> sensors;
  std::vector<SensorAbsence> unavailable;  // sources with no sensor, with reasons
  EnergyTotal total;
  std::optional<EnergyEstimate> estimate;  // only when asked for; always labelled estimated
  std::string estimate_unavailable;        // asked for, but could not be made: why
  std::optional<SamplerWindowStats> sampler;
  bool idle_subtracted = false;  // an idle baseline was applied (net_energy_j present)

  bool measured() const { return !sensors.empty(); }  // false: every energy is `unavailable`
};

// One line per device whose clocks something other than idleness held down at the window's start or
// end (a power cap, a thermal slowdown, ... : DeviceState's clock-event reasons), with its SM clock,
// temperature and power limit then, e.g. "nvml:gpu0: clocks limited by sw_power_cap at the window's
// end (SM 1410 MHz, 83 °C, power limit 300 W)". Empty when none was. Only for the sensors in `ids`
// when it is not empty.
std::vector<std::string> clock_limit_warnings(const Measurement& measurement, const std::vector<std::string>& ids = {});

// JSON record of a Measurement (the shape is documented in docs/energy.md).
nlohmann::json to_json(const Measurement& measurement);
nlohmann::json to_json(const SensorInfo& info);
nlohmann::json to_json(const DeviceState& state);

}  // namespace qjoule::energy

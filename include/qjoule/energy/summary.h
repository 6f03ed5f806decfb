// Compact, terminal-friendly text for `qjoule energy` and `qjoule sensors`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qjoule/energy/energy_meter.h"
#include "qjoule/energy/measurement.h"

namespace qjoule::energy {

// Energy per sensor, totals, flags, idle baseline, sampler accounting and the absent sources.
std::string format_measurement(const Measurement& measurement, const std::optional<IdleBaseline>& idle = std::nullopt);

// One found sensor: what it measures, counter/power, resolution, update period (observed when
// `stats` is given), notes.
std::string format_sensor(const SensorInfo& info, const SensorStats* stats = nullptr);

// Every absent source with its reason, one per line ("  nvml  unavailable: ...").
std::string format_absences(const std::vector<SensorAbsence>& absent);

// "12.3 J", "1.234 kJ", "850 mJ"; "1.2 ms", "3.004 s"; "65.2 W".
std::string format_joules(double joules);
std::string format_seconds(double seconds);
std::string format_watts(double watts);

}  // namespace qjoule::energy

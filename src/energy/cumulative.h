// The running state of one sensor since the sampler started, and how to read it between samples.
// A window's result is the difference of two such states, taken at its start and end times.
#pragma once

#include <cstdint>

namespace qjoule::energy {

struct Cumulative {
  std::int64_t time_ns = 0;
  double counter_j = 0.0;   // unwrapped counter energy since the first sample
  double integral_j = 0.0;  // trapezoid integral of power samples since the first sample
  double covered_s = 0.0;   // time between samples that were no further apart than the gap limit
  std::uint64_t samples = 0;
  std::uint64_t wraps = 0;
  std::uint64_t resets = 0;
  std::uint64_t errors = 0;
  double power_w = 0.0;  // power at time_ns (a sample, or interpolated)
  bool has_power = false;
};

// State at `time_ns`, with prev.time_ns < time_ns <= next.time_ns, assuming power changes linearly
// between the two samples. `max_gap_ns`: a longer gap between them is a hole, neither integrated
// nor covered.
Cumulative interpolate(const Cumulative& prev, const Cumulative& next, std::int64_t time_ns, std::int64_t max_gap_ns);

// State at `time_ns` >= last.time_ns when no later sample will come: the counter stays where it
// was; when time_ns is within `max_gap_ns` of the last sample its power is held (integrated, and the
// time covered), otherwise the whole stretch is uncovered.
Cumulative extrapolate(const Cumulative& last, std::int64_t time_ns, std::int64_t max_gap_ns);

// State at `time_ns` <= first.time_ns, before the first sample: nothing yet.
Cumulative before_first(const Cumulative& first, std::int64_t time_ns);

// Unwraps one counter step. `range` = 0 means the counter never wraps (then a backwards step is a
// reset: delta 0). Returns the delta in counter units and counts a wrap or reset.
std::uint64_t counter_delta(std::uint64_t previous, std::uint64_t current, std::uint64_t range, std::uint64_t& wraps,
                            std::uint64_t& resets);

}  // namespace qjoule::energy

#include "energy/cumulative.h"

#include <algorithm>

#include "energy/nanoseconds.h"

namespace qjoule::energy {

Cumulative interpolate(const Cumulative& prev, const Cumulative& next, std::int64_t time_ns, std::int64_t max_gap_ns) {
  Cumulative at = prev;
  at.time_ns = time_ns;
  const std::int64_t gap = next.time_ns - prev.time_ns;
  if (gap <= 0) return next;
  const double into_s = static_cast<double>(time_ns - prev.time_ns) / kNsPerS;
  const double f = static_cast<double>(time_ns - prev.time_ns) / static_cast<double>(gap);
  at.counter_j = prev.counter_j + (next.counter_j - prev.counter_j) * f;
  at.has_power = prev.has_power && next.has_power;
  at.power_w = at.has_power ? prev.power_w + (next.power_w - prev.power_w) * f : 0.0;
  at.integral_j = prev.integral_j;
  if (gap <= max_gap_ns) {  // otherwise a hole: neither integrated nor covered
    at.covered_s = prev.covered_s + into_s;
    if (at.has_power) at.integral_j += into_s * (prev.power_w + at.power_w) / 2.0;
  }
  // samples, wraps, resets and errors count what happened at or before prev.
  return at;
}

Cumulative extrapolate(const Cumulative& last, std::int64_t time_ns, std::int64_t max_gap_ns) {
  Cumulative at = last;
  if (time_ns <= last.time_ns) return at;
  at.time_ns = time_ns;
  const std::int64_t held_ns = std::min(time_ns - last.time_ns, max_gap_ns);
  if (held_ns == time_ns - last.time_ns) {
    const double held_s = static_cast<double>(held_ns) / kNsPerS;
    at.covered_s = last.covered_s + held_s;
    if (last.has_power) at.integral_j = last.integral_j + held_s * last.power_w;
  }
  return at;
}

Cumulative before_first(const Cumulative& first, std::int64_t time_ns) {
  Cumulative at;
  at.time_ns = time_ns;
  at.counter_j = first.counter_j;
  at.integral_j = first.integral_j;
  at.covered_s = first.covered_s;
  at.samples = first.samples > 0 ? first.samples - 1 : 0;
  at.errors = first.errors;
  return at;
}

std::uint64_t counter_delta(std::uint64_t previous, std::uint64_t current, std::uint64_t range, std::uint64_t& wraps,
                            std::uint64_t& resets) {
  if (current >= previous) return current - previous;
  if (range > 0 && previous <= range) {
    ++wraps;
    return (range - previous) + current;
  }
  ++resets;
  return 0;
}

}  // namespace qjoule::energy

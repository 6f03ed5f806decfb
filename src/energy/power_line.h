// One line of an external meter's output: `timestamp_s,watts` (Unix time in seconds, watts).
#pragma once

#include <string_view>

namespace qjoule::energy {

struct PowerLine {
  double timestamp_s = 0.0;  // seconds since 1970 (e.g. `date +%s.%N`)
  double watts = 0.0;
};

enum class PowerLineKind { sample, skip, malformed };  // skip: blank line or `#` comment

// Parses one line (without its newline). Allocation-free.
PowerLineKind parse_power_line(std::string_view line, PowerLine& out) noexcept;

}  // namespace qjoule::energy

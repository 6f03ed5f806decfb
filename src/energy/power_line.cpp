#include "energy/power_line.h"

#include <charconv>
#include <cmath>

namespace qjoule::energy {

namespace {

std::string_view strip(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  return text;
}

bool parse_number(std::string_view text, double& out) {
  text = strip(text);
  if (text.empty()) return false;
  if (text.front() == '+') text.remove_prefix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && std::isfinite(out);
}

}  // namespace

PowerLineKind parse_power_line(std::string_view line, PowerLine& out) noexcept {
  line = strip(line);
  if (line.empty() || line.front() == '#') return PowerLineKind::skip;
  const auto comma = line.find(',');
  if (comma == std::string_view::npos) return PowerLineKind::malformed;
  PowerLine parsed;
  if (!parse_number(line.substr(0, comma), parsed.timestamp_s)) return PowerLineKind::malformed;
  if (!parse_number(line.substr(comma + 1), parsed.watts)) return PowerLineKind::malformed;
  if (parsed.timestamp_s <= 0.0 || parsed.watts < 0.0) return PowerLineKind::malformed;
  out = parsed;
  return PowerLineKind::sample;
}

}  // namespace qjoule::energy

#include "qjoule/report/power_trace.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::report {
namespace {

constexpr std::string_view kHeader = "time_s,sensor,energy_j,power_w";

std::optional<double> number_of(std::string_view cell) {
  if (cell.empty()) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
  if (ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

struct Reading {
  double time_s;
  std::optional<double> energy_j, power_w;
};

}  // namespace

PowerTrace read_power_trace(const std::filesystem::path& path, std::size_t max_points) {
  std::ifstream in(path);
  if (!in) fail("cannot read power trace '{}': {}", path.string(), std::generic_category().message(errno));
  std::string line;
  if (!std::getline(in, line)) fail("power trace '{}' is empty, expected the header '{}'", path.string(), kHeader);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != kHeader) fail("power trace '{}' starts '{}', expected the header '{}'", path.string(), line, kHeader);

  std::vector<std::string> order;
  std::map<std::string, std::vector<Reading>> readings;
  std::size_t bad_rows = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string_view> cells;
    std::string_view rest = line;
    for (std::size_t comma; (comma = rest.find(',')) != std::string_view::npos; rest.remove_prefix(comma + 1))
      cells.push_back(rest.substr(0, comma));
    cells.push_back(rest);
    const auto time = cells.size() == 4 ? number_of(cells[0]) : std::nullopt;
    if (!time || cells[1].empty()) {
      ++bad_rows;
      continue;
    }
    const std::string sensor(cells[1]);
    if (readings.find(sensor) == readings.end()) order.push_back(sensor);
    readings[sensor].push_back({*time, number_of(cells[2]), number_of(cells[3])});
  }

  PowerTrace trace;
  if (bad_rows > 0) trace.notes.push_back(fmt::format("{} malformed row(s) skipped", bad_rows));
  for (const auto& sensor : order) {
    const auto& rows = readings[sensor];
    PowerSeries series;
    series.sensor = sensor;
    bool any_measured = false, any_derived = false;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].power_w) {
        series.time_s.push_back(rows[i].time_s);
        series.power_w.push_back(*rows[i].power_w);
        any_measured = true;
      } else if (i > 0 && rows[i].energy_j && rows[i - 1].energy_j && rows[i].time_s > rows[i - 1].time_s) {
        // A counter: the mean power since the previous reading, drawn at the interval's end.
        series.time_s.push_back(rows[i].time_s);
        series.power_w.push_back((*rows[i].energy_j - *rows[i - 1].energy_j) / (rows[i].time_s - rows[i - 1].time_s));
        any_derived = true;
      }
    }
    if (series.time_s.empty()) {
      trace.notes.push_back(fmt::format("{}: no power readings and no energy to derive them from", sensor));
      continue;
    }
    series.derived_from_energy = any_derived && !any_measured;
    if (max_points > 1 && series.time_s.size() > max_points) {
      const std::size_t n = series.time_s.size();
      PowerSeries thinned{series.sensor, {}, {}, series.derived_from_energy};
      for (std::size_t k = 0; k < max_points; ++k) {
        const std::size_t i = k * (n - 1) / (max_points - 1);
        thinned.time_s.push_back(series.time_s[i]);
        thinned.power_w.push_back(series.power_w[i]);
      }
      trace.notes.push_back(fmt::format("{}: {} readings thinned to {} for drawing", sensor, n, max_points));
      series = std::move(thinned);
    }
    trace.series.push_back(std::move(series));
  }
  return trace;
}

}  // namespace qjoule::report

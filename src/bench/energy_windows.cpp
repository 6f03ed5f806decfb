#include "bench/energy_windows.h"

#include <algorithm>

#include <fmt/format.h>

namespace qjoule::bench::detail {

std::size_t repetitions_of_window(std::size_t count, std::size_t windows, std::size_t w) {
  return count * (w + 1) / windows - count * w / windows;
}

WindowPerToken window_per_token(const WindowEnergy& e, double tokens) {
  if (!e.basis_j) return {std::nullopt, e.unavailable};
  if (!(tokens > 0)) return {std::nullopt, "the window processed no tokens"};
  return {*e.basis_j * 1e3 / tokens, ""};
}

std::optional<double> windows_spread(const std::vector<WindowPerToken>& windows) {
  std::vector<double> values;
  for (const auto& w : windows)
    if (w.mj_per_token) values.push_back(*w.mj_per_token);
  if (values.size() < 2) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  if (!(median > 0)) return std::nullopt;
  return (values.back() - values.front()) / median;
}

std::string windows_note(const std::vector<WindowPerToken>& windows, double min_s) {
  std::string values;
  for (const auto& w : windows)
    values += (values.empty() ? "" : ", ") + (w.mj_per_token ? fmt::format("{:.4g}", *w.mj_per_token) : "unavailable");
  std::string note =
      fmt::format("decode energy in {} windows of >= {:.3g} s each: {} mJ/token", windows.size(), min_s, values);
  if (const auto spread = windows_spread(windows))
    note += fmt::format(" (spread {:.1f}% of the median)", 100 * *spread);
  return note;
}

}  // namespace qjoule::bench::detail

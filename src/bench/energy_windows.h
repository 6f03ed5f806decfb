// A decoder run's decode phase measured in several back-to-back energy windows (issue 55: a counter that
// updates every ~100 ms gave 247 and 302 mJ/token in two 0.5 s windows of the same decode): how the timed
// repetitions split over them, each window's energy per token and their spread, and the rule that a window
// too short for a counted sensor's updates has no energy number, only its reason (window_energy.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bench/window_energy.h"
#include "qjoule/energy/measurement.h"

namespace qjoule::bench::detail {

// Repetitions window w (0 .. windows − 1) takes of a fixed count split evenly over `windows` (the first
// ones take one fewer where it does not divide).
std::size_t repetitions_of_window(std::size_t count, std::size_t windows, std::size_t w);

// One window's energy per token: basis over tokens, or why there is none.
struct WindowPerToken {
  std::optional<double> mj_per_token;
  std::string unavailable;
};
WindowPerToken window_per_token(const WindowEnergy& e, double tokens);

// The record's note on the windows: each one's mJ/token (or "unavailable") and, where two or more have a
// number, their spread (max − min) over the median, e.g. "decode energy in 3 windows of >= 2 s each:
// 41.2, 41.9, 40.8 mJ/token (spread 2.7% of the median)".
std::string windows_note(const std::vector<WindowPerToken>& windows, double min_s);
// The spread (max − min) / median of the windows' numbers; none with fewer than two.
std::optional<double> windows_spread(const std::vector<WindowPerToken>& windows);

}  // namespace qjoule::bench::detail

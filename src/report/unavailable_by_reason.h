// The report's lists of runs without a figure: a reason that several runs share (a sensor missing on the
// machine) is said once, with the runs it covers, not once a run.
#pragma once

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::report {

// (run, reason) pairs → "RUN, RUN, …: unavailable (REASON)", one line a reason, in the order first seen.
inline std::vector<std::string> unavailable_by_reason(
    const std::vector<std::pair<std::string, std::string>>& runs_reasons) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const auto& [run, reason] : runs_reasons) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == reason; });
    if (it == groups.end()) it = groups.insert(groups.end(), {reason, {}});
    it->second.push_back(run);
  }
  std::vector<std::string> lines;
  for (const auto& [reason, names] : groups)
    lines.push_back(fmt::format("{}: unavailable ({})", fmt::join(names, ", "), reason));
  return lines;
}

}  // namespace qjoule::report

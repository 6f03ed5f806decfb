// The Pareto frontier of a cost/quality trade-off: the configurations that no other configuration
// beats on both axes at once (e.g. energy per inference down, accuracy up).
#pragma once

#include <cstddef>
#include <vector>

namespace qjoule::report {

struct ParetoPoint {
  double cost = 0;     // minimized (J/inference, or p50 latency)
  double quality = 0;  // maximized (accuracy, or top-1 agreement with FP32)
};

// Indices into `points` of the points no other point dominates (another dominates a point when its
// cost is <= and its quality >= with at least one strictly better), ordered by cost, then by index.
// Exact ties (equal cost and quality) are all kept: neither dominates the other. Points with a
// non-finite coordinate are never on the frontier.
std::vector<std::size_t> pareto_frontier(const std::vector<ParetoPoint>& points);

}  // namespace qjoule::report

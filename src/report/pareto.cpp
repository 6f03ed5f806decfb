#include "qjoule/report/pareto.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace qjoule::report {

std::vector<std::size_t> pareto_frontier(const std::vector<ParetoPoint>& points) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (std::isfinite(points[i].cost) && std::isfinite(points[i].quality)) order.push_back(i);
  // Cheapest first, and among equal costs the best first: then a point is on the frontier exactly
  // when its quality beats every cheaper point's, or equals the best so far at the same cost and
  // quality (an exact tie with a frontier point).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (points[a].cost != points[b].cost) return points[a].cost < points[b].cost;
    return points[a].quality > points[b].quality;
  });
  std::vector<std::size_t> frontier;
  for (const std::size_t i : order) {
    if (frontier.empty()) {
      frontier.push_back(i);
      continue;
    }
    const ParetoPoint& last = points[frontier.back()];
    const bool tie = points[i].cost == last.cost && points[i].quality == last.quality;
    if (tie || points[i].quality > last.quality) frontier.push_back(i);
  }
  return frontier;
}

}  // namespace qjoule::report

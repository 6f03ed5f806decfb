#include "qjoule/model/moe_routing.h"

#include <cmath>

#include "qjoule/error.h"

namespace qjoule::model {

std::vector<std::vector<ExpertRoute>> route_top_k(std::span<const float> logits, int64_t tokens, int64_t experts,
                                                  int64_t k, bool normalize) {
  if (experts <= 0 || k <= 0 || k > experts || static_cast<int64_t>(logits.size()) != tokens * experts)
    fail(
        "mixture routing: {} logits for {} tokens × {} experts, top-{}; expected tokens × experts and 1 <= k <= "
        "experts",
        logits.size(), tokens, experts, k);
  std::vector<std::vector<ExpertRoute>> routes(static_cast<std::size_t>(experts));
  std::vector<float> p(static_cast<std::size_t>(experts));
  std::vector<char> taken(static_cast<std::size_t>(experts));
  std::vector<int64_t> chosen(static_cast<std::size_t>(k));
  std::vector<float> weight(static_cast<std::size_t>(k));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits.data() + t * experts;
    float max = l[0];
    for (int64_t e = 1; e < experts; ++e) max = l[e] > max ? l[e] : max;
    float sum = 0.0f;
    for (int64_t e = 0; e < experts; ++e) sum += p[static_cast<std::size_t>(e)] = std::exp(l[e] - max);
    for (int64_t e = 0; e < experts; ++e) p[static_cast<std::size_t>(e)] /= sum;
    // Selection by scans, no sort: a NaN never orders, and the lower index wins a tie.
    std::fill(taken.begin(), taken.end(), 0);
    float top_sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t e = 0; e < experts; ++e) {
        if (taken[static_cast<std::size_t>(e)]) continue;
        if (best < 0 || p[static_cast<std::size_t>(e)] > p[static_cast<std::size_t>(best)] ||
            (std::isnan(p[static_cast<std::size_t>(best)]) && !std::isnan(p[static_cast<std::size_t>(e)])))
          best = e;
      }
      taken[static_cast<std::size_t>(best)] = 1;
      chosen[static_cast<std::size_t>(j)] = best;
      weight[static_cast<std::size_t>(j)] = p[static_cast<std::size_t>(best)];
      top_sum += weight[static_cast<std::size_t>(j)];
    }
    for (int64_t j = 0; j < k; ++j) {
      const float w = normalize ? weight[static_cast<std::size_t>(j)] / top_sum : weight[static_cast<std::size_t>(j)];
      routes[static_cast<std::size_t>(chosen[static_cast<std::size_t>(j)])].push_back({t, w});
    }
  }
  return routes;
}

}  // namespace qjoule::model

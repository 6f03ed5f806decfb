#include "qjoule/bench/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "qjoule/error.h"

namespace qjoule::bench {

double percentile_of_sorted(const std::vector<double>& sorted_ms, double p) {
  if (sorted_ms.empty()) fail("latency: percentile of no samples");
  const double rank = (static_cast<double>(sorted_ms.size()) - 1.0) * (p / 100.0);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, sorted_ms.size() - 1);
  const double fraction = rank - static_cast<double>(lo);
  return sorted_ms[lo] + fraction * (sorted_ms[hi] - sorted_ms[lo]);
}

LatencyStats summarize_latency(std::vector<double> samples_ms) {
  if (samples_ms.empty()) fail("latency: no samples, expected at least one timed iteration");
  for (std::size_t i = 0; i < samples_ms.size(); ++i)
    if (!std::isfinite(samples_ms[i]) || samples_ms[i] < 0)
      fail("latency: sample {} is {} ms, expected a finite non-negative time", i, samples_ms[i]);
  std::sort(samples_ms.begin(), samples_ms.end());

  LatencyStats stats;
  stats.count = samples_ms.size();
  const double n = static_cast<double>(stats.count);
  double sum = 0;
  for (double s : samples_ms) sum += s;
  stats.mean_ms = sum / n;
  if (stats.count > 1) {
    double squares = 0;
    for (double s : samples_ms) squares += (s - stats.mean_ms) * (s - stats.mean_ms);
    stats.std_ms = std::sqrt(squares / (n - 1.0));
  }
  stats.min_ms = samples_ms.front();
  stats.max_ms = samples_ms.back();
  stats.p50_ms = percentile_of_sorted(samples_ms, 50);
  stats.p90_ms = percentile_of_sorted(samples_ms, 90);
  stats.p99_ms = percentile_of_sorted(samples_ms, 99);
  return stats;
}

std::pair<double, double> mean_and_sd(const std::vector<double>& values) {
  const double n = static_cast<double>(values.size());
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double squares = 0.0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return {mean, values.size() > 1 ? std::sqrt(squares / (n - 1.0)) : 0.0};
}

std::vector<double> rates(const std::vector<double>& ms, std::size_t tokens) {
  std::vector<double> out;
  for (double t : ms) out.push_back(static_cast<double>(tokens) * 1e3 / std::max(t, 1e-9));
  return out;
}

}  // namespace qjoule::bench

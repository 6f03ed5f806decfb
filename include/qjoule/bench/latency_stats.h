// Summary statistics of per-iteration latencies (one sample = one timed forward pass of a batch).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace qjoule::bench {

struct LatencyStats {
  std::size_t count = 0;
  double mean_ms = 0, std_ms = 0, min_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};

// Percentiles interpolate linearly between the closest ranks (numpy.percentile's default "linear":
// rank (n - 1) * p). std is the sample standard deviation (n - 1 in the denominator), 0 for one
// sample. No samples, or a negative or non-finite sample, fails.
LatencyStats summarize_latency(std::vector<double> samples_ms);

// The percentile p (0..100) of sorted samples, interpolated as above. `sorted_ms` must be non-empty.
double percentile_of_sorted(const std::vector<double>& sorted_ms, double p);

// Mean and sample standard deviation (n - 1; 0 for one value) of non-empty values.
std::pair<double, double> mean_and_sd(const std::vector<double>& values);

// Tokens/s of each repetition that processed `tokens` tokens in `ms` milliseconds (a decoder's phases).
std::vector<double> rates(const std::vector<double>& ms, std::size_t tokens);

}  // namespace qjoule::bench

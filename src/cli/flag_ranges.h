// Range checks for numeric flags, attached where each flag is declared, so that a value outside its
// range is one line naming the flag, the value and the range ("--batch: -1 is out of range, expected
// 1 to 1000000") instead of a wrapped or silently replaced number.
#pragma once

#include <CLI/CLI.hpp>

namespace qjoule::cli {

// The most CPU threads any command accepts (far above any core count: a guard against typos).
inline constexpr int kMaxThreads = 1024;

CLI::Validator in_range(double min, double max);  // min <= value <= max
CLI::Validator above(double min, double max);     // min < value <= max
// 0 (what `zero_means`: --max-tokens of ppl and bench "the whole text") or min <= value <= max.
CLI::Validator zero_or_range(double min, double max, const std::string& zero_means = "the whole text");

// --threads N of eval, ppl and generate (declared with in_range(1, kMaxThreads); 0 = not given: all
// cores): sets the kernels' thread count, with a one-line warning when N is more than the logical CPUs.
void use_threads(int threads);

// Prints one warning line when `threads` is more than the logical CPUs here.
void warn_if_more_threads_than_cpus(long long threads, const char* flag);

}  // namespace qjoule::cli

#include "cli/flag_ranges.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "qjoule/kernels/threads.h"

namespace qjoule::cli {
namespace {

// zero_means (not empty): 0 passes as well, meaning that ("the whole text").
CLI::Validator range_validator(double min, double max, bool exclusive_min, const std::string& zero_means = "") {
  const bool zero_too = !zero_means.empty();
  std::string range =
      exclusive_min ? fmt::format("more than {} and at most {}", min, max) : fmt::format("{} to {}", min, max);
  std::string description = exclusive_min ? fmt::format("({} .. {}]", min, max) : fmt::format("[{} .. {}]", min, max);
  if (zero_too) {
    range = fmt::format("0 ({}) or {}", zero_means, range);
    description = fmt::format("0 or {}", description);
  }
  return CLI::Validator(
      [min, max, exclusive_min, zero_too, range](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
          return fmt::format("'{}' is not a number, expected {}", text, range);
        const bool ok = (zero_too && v == 0.0) || ((exclusive_min ? v > min : v >= min) && v <= max);
        return ok ? std::string() : fmt::format("{} is out of range, expected {}", text, range);
      },
      description);
}

}  // namespace

CLI::Validator in_range(double min, double max) { return range_validator(min, max, false); }

CLI::Validator zero_or_range(double min, double max, const std::string& zero_means) {
  return range_validator(min, max, false, zero_means);
}
CLI::Validator above(double min, double max) { return range_validator(min, max, true); }

void warn_if_more_threads_than_cpus(long long threads, const char* flag) {
  const unsigned cpus = std::thread::hardware_concurrency();
  if (cpus > 0 && threads > static_cast<long long>(cpus))
    fmt::print(stderr,
               "warning: {} {} is more than the {} logical CPUs here: threads will share CPUs and run slower than "
               "{} would\n",
               flag, threads, cpus, cpus);
}

void use_threads(int threads) {
  if (threads > 0) warn_if_more_threads_than_cpus(threads, "--threads");
  kernels::set_num_threads(threads);
}

}  // namespace qjoule::cli

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

CLI::Validator range_validator(double min, double max, bool exclusive_min) {
  const std::string range =
      exclusive_min ? fmt::format("more than {} and at most {}", min, max) : fmt::format("{} to {}", min, max);
  return CLI::Validator(
      [min, max, exclusive_min, range](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v))
          return fmt::format("'{}' is not a number, expected {}", text, range);
        const bool ok = (exclusive_min ? v > min : v >= min) && v <= max;
        return ok ? std::string() : fmt::format("{} is out of range, expected {}", text, range);
      },
      exclusive_min ? fmt::format("({} .. {}]", min, max) : fmt::format("[{} .. {}]", min, max));
}

}  // namespace

CLI::Validator in_range(double min, double max) { return range_validator(min, max, false); }

CLI::Validator zero_or_range(double min, double max) {
  const CLI::Validator range = range_validator(min, max, false);
  const std::string expected = fmt::format("expected 0 (the whole text) or {} to {}", min, max);
  return CLI::Validator(
      [range, expected](std::string& text) -> std::string {
        std::string copy = text;
        const std::string error = range(copy);
        if (error.empty()) return {};
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (!text.empty() && end == text.c_str() + text.size() && v == 0.0) return {};
        return error.find("is not a number") != std::string::npos
                   ? fmt::format("'{}' is not a number, {}", text, expected)
                   : fmt::format("{} is out of range, {}", text, expected);
      },
      fmt::format("0 or [{} .. {}]", min, max));
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

#include "qjoule/limits/limits_cache.h"

#include <cstdlib>
#include <ctime>
#include <functional>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "qjoule/error.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/limits/gpu_limits.h"

namespace qjoule::limits {
namespace {

// Seconds since `iso` ("2026-11-26T18:40:02Z"); a very large age when it cannot be read.
double age_seconds(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return 1e18;
  return std::difftime(std::time(nullptr), timegm(&tm));
}

// Why the cached limits do not stand for this machine now ("" = they do).
std::string stale_because(const MachineLimits& cached, int threads, const std::string& fingerprint) {
  if (cached.version != kMachineLimitsVersion)
    return fmt::format("method version {}, now {}", cached.version, kMachineLimitsVersion);
  if (cached.threads != threads) return fmt::format("{} threads, now {}", cached.threads, threads);
  if (cached.machine != fingerprint) return "another machine (" + cached.machine + ")";
  if (age_seconds(cached.measured_at) > kLimitsMaxAgeDays * 86400.0)
    return fmt::format("older than {} days ({})", kLimitsMaxAgeDays, cached.measured_at);
  return "";
}

std::filesystem::path cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::filesystem::path(xdg) / "qjoule";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::filesystem::path(home) / ".cache" / "qjoule";
  return {};
}

// The limits in `file` when they stand (same fingerprint, version and threads, recent), else nullopt
// with `why_not` set ("no cache yet", "the cache was for …", "the cache could not be read (…)").
std::optional<MachineLimits> standing_cache(const std::filesystem::path& file, int threads,
                                            const std::string& fingerprint, std::string& why_not) {
  std::error_code ec;
  if (file.empty() || !std::filesystem::exists(file, ec)) {
    why_not = "no cache yet";
    return std::nullopt;
  }
  try {
    std::ifstream in(file);
    MachineLimits cached = machine_limits_from_json(nlohmann::json::parse(in));
    why_not = stale_because(cached, threads, fingerprint);
    if (why_not.empty()) return cached;
    why_not = "the cache was for " + why_not;
  } catch (const std::exception& e) {
    why_not = fmt::format("the cache could not be read ({})", e.what());
  }
  return std::nullopt;
}

// The cached limits in `file` when they stand, else measured and written there.
CachedLimits cached_or_measured(const std::filesystem::path& file, int threads, const std::string& fingerprint,
                                bool refresh, const std::function<MachineLimits()>& measure) {
  std::string why_measured = "--refresh";
  if (!refresh) {
    if (auto cached = standing_cache(file, threads, fingerprint, why_measured))
      return {*cached, true, fmt::format("read from {} (measured {})", file.string(), cached->measured_at)};
  }
  CachedLimits result{measure(), false, ""};
  result.note = fmt::format("measured in {:.1f} s ({})", result.limits.measure_seconds, why_measured);
  if (!result.limits.contention.empty()) {
    result.note += "; not cached: " + result.limits.contention + " (its figures may be low; measured again next time)";
  } else if (file.empty()) {
    result.note += "; not cached: neither XDG_CACHE_HOME nor HOME is set";
  } else {
    try {
      std::error_code ec;
      std::filesystem::create_directories(file.parent_path(), ec);
      io::write_file_atomically(file, to_json(result.limits).dump(2) + "\n");
      result.note += "; written to " + file.string();
    } catch (const std::exception& e) {  // a cache that cannot be written is a note, not an error
      result.note += std::string("; not cached: ") + e.what();
    }
  }
  return result;
}

}  // namespace

std::filesystem::path limits_cache_file(int threads) {
  const auto dir = cache_dir();
  return dir.empty() ? dir : dir / fmt::format("limits-t{}.json", threads);
}

std::optional<MachineLimits> cached_machine_limits(int threads) {
  if (const char* given = std::getenv("QJOULE_LIMITS_FILE"); given != nullptr && *given != '\0')
    return machine_limits(threads).limits;
  std::string why_not;  // unreadable or stale: as if there were none (the next `qjoule limits` measures over it)
  return standing_cache(limits_cache_file(threads), threads, machine_fingerprint(), why_not);
}

CachedLimits machine_limits(int threads, bool refresh) {
  if (const char* given = std::getenv("QJOULE_LIMITS_FILE"); given != nullptr && *given != '\0') {
    std::ifstream in(given);
    if (!in) fail("QJOULE_LIMITS_FILE={}: cannot be read; expected the JSON `qjoule limits --json` writes", given);
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      fail("QJOULE_LIMITS_FILE={}: not JSON ({}); expected the JSON `qjoule limits --json` writes", given, e.what());
    }
    MachineLimits l = machine_limits_from_json(json);
    return {l, true,
            fmt::format("given by QJOULE_LIMITS_FILE={} ({} threads, measured {} on {})", given, l.threads,
                        l.measured_at, l.machine)};
  }
  return cached_or_measured(limits_cache_file(threads), threads, machine_fingerprint(), refresh,
                            [threads] { return measure_machine_limits(threads); });
}

CachedLimits gpu_machine_limits(int device, bool refresh) {
  kernels::require_cuda_device(fmt::format("cuda:{}", device));
  const auto dir = cache_dir();
  return cached_or_measured(dir.empty() ? dir : dir / fmt::format("limits-cuda{}.json", device), 0,
                            gpu_fingerprint(device), refresh, [device] { return measure_gpu_limits(device); });
}

}  // namespace qjoule::limits

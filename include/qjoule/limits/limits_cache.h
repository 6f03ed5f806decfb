// The machine limits, measured once per machine and thread count and kept in a small JSON file:
// $XDG_CACHE_HOME/qjoule/limits-t<threads>.json ($HOME/.cache/qjoule/ when XDG_CACHE_HOME is unset).
// A cached file stands for this machine while its fingerprint (CPU model, microcode, memory size,
// kernel), its method version and thread count match and it is younger than kLimitsMaxAgeDays;
// otherwise, or with refresh, the limits are measured again and the file rewritten (atomically). A
// cache that cannot be written is said in the note, never an error; one that cannot be read (broken
// JSON) is measured over. QJOULE_LIMITS_FILE=FILE uses the limits in FILE instead (another machine's,
// a test's): nothing measured, nothing written; an unreadable FILE is a one-line error.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "qjoule/limits/machine_limits.h"

namespace qjoule::limits {

inline constexpr int kLimitsMaxAgeDays = 30;

// The cache file for `threads` ("" when neither XDG_CACHE_HOME nor HOME is set); a GPU's is
// limits-cuda<N>.json beside it.
std::filesystem::path limits_cache_file(int threads);

struct CachedLimits {
  MachineLimits limits;
  bool from_cache = false;
  std::string note;  // "read from FILE (measured 2026-11-26T18:40:02Z)", "measured in 3.2 s; written to FILE", ...
};

CachedLimits machine_limits(int threads, bool refresh = false);

// The limits for `threads` where they stand without measuring (QJOULE_LIMITS_FILE, or a cache that
// still stands for this machine), else nullopt: for callers that must not spend seconds measuring (the
// Python package's bench of a caller's function).
std::optional<MachineLimits> cached_machine_limits(int threads);
// GPU N's limits (gpu_limits.h), cached as limits-cuda<N>.json, stale when gpu_fingerprint(N) changed
// or after kLimitsMaxAgeDays; QJOULE_LIMITS_FILE is not used for a GPU.
CachedLimits gpu_machine_limits(int device, bool refresh = false);

}  // namespace qjoule::limits

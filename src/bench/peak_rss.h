// The process's resident-set high-water mark (VmHWM), reset before each run so that each record's
// peak is that run's (Linux: writing "5" to /proc/self/clear_refs resets it).
#pragma once

#include <cstdint>
#include <optional>

namespace qjoule::bench {

bool reset_peak_rss();                       // false where the kernel refuses (then the peak is the process's)
std::optional<std::uint64_t> peak_rss_bytes();  // VmHWM from /proc/self/status

}  // namespace qjoule::bench

// The process's resident-set high-water mark (VmHWM), reset before each run so that each record's
// peak is that run's (Linux: writing "5" to /proc/self/clear_refs resets it).
#pragma once

#include <cstdint>
#include <optional>

namespace qjoule::bench {

// Returns freed heap memory to the system (malloc_trim), then resets the high-water mark to the current
// RSS; false where the kernel refuses (then the peak is the process's).
bool reset_peak_rss();
std::optional<std::uint64_t> peak_rss_bytes();          // VmHWM from /proc/self/status
std::optional<std::uint64_t> current_rss_bytes();       // VmRSS from /proc/self/status
std::optional<std::uint64_t> available_memory_bytes();  // MemAvailable from /proc/meminfo

}  // namespace qjoule::bench

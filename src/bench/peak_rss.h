// The process's resident-set high-water mark (VmHWM), reset before each run so that each record's
// peak is that run's (Linux: writing "5" to /proc/self/clear_refs resets it).
#pragma once

#include <cstdint>
#include <optional>

namespace qjoule::bench {

// Fixes glibc's mmap threshold at 32 MiB, the most its dynamic threshold reaches: blocks below it
// come from the heap (a forward's activations are reused, not faulted in again on every call), larger
// ones are mapped and unmapped. Left dynamic, the threshold follows the largest block freed so far, so
// which buffers stayed resident depended on the process's history: the same SST-2 int8 run peaked at
// 126.7 MiB in the CUDA build and 135.8 MiB in the one without it. qjoule's main() calls it first;
// reset_peak_rss() too (a library user's process). Idempotent.
void fix_heap_thresholds();

// Returns the heap's free pages to the system (malloc_trim): after a model is built, the FP32 copies
// its Linears were made from are free but resident in holes below the built weights (SST-2
// DistilBERT-mini int8: 9.6 MB more than the model holds), which the run's peak would count again.
void return_freed_memory();

// Returns freed heap memory to the system (malloc_trim), then resets the high-water mark to the current
// RSS; false where the kernel refuses (then the peak is the process's).
bool reset_peak_rss();
std::optional<std::uint64_t> peak_rss_bytes();          // VmHWM from /proc/self/status
std::optional<std::uint64_t> current_rss_bytes();       // VmRSS from /proc/self/status
std::optional<std::uint64_t> available_memory_bytes();  // MemAvailable from /proc/meminfo

}  // namespace qjoule::bench

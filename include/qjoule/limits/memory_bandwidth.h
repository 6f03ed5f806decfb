// This machine's measured memory bandwidth, the roof of "fraction of the limit" for memory-bound work
// (decode, which streams the weights once per token). Two figures, on `threads` OpenMP threads, each
// over buffers far larger than the last-level cache (at least 2x it and 128 MiB), best of 5 passes:
//   read:  a streaming sum of 64-bit words in vector registers (the traffic of a GEMV that reads its
//          weights), bytes read;
//   triad: STREAM's a[i] = b[i] + s·c[i] on FP64 arrays, counted as STREAM counts it: 3 × 8 bytes per
//          element (two reads and one write; the write-allocate read is not counted, so the true
//          traffic is higher and a kernel that only reads can exceed it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace qjoule::limits {

struct MemoryBandwidth {
  double gb_per_s = 0.0;          // 1e9 bytes per second
  std::int64_t buffer_bytes = 0;  // bytes of each array (triad) or of the buffer (read)
  std::int64_t llc_bytes = 0;     // last-level cache size read from sysfs (0: unknown)
};

// Each measured on first call for each thread count (a second or two) and cached for the process.
const MemoryBandwidth& measured_triad(int threads);
const MemoryBandwidth& measured_read(int threads);

std::string triad_method();
std::string read_method();

// A short read probe (~40-80 ms over 4x the last-level cache, at least 128 MiB: at 2x a 32 MiB L3 read
// 65-97 GB/s where 4x, 8x and 16x read 50-64 as measured_read did, Zen 4 VM), for the bandwidth the host
// gives at one moment, beside a run's timed windows, where measured_read is the best it gave once;
// nullopt where the buffer cannot be allocated.
std::optional<double> read_rate_now(int threads);
std::string read_now_method();

// The largest cache of cpu0 (the L3 where there is one), from sysfs; 0 when unreadable.
std::int64_t last_level_cache_bytes();

}  // namespace qjoule::limits

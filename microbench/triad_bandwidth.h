// This machine's measured memory bandwidth, the yardstick of "fraction of the limit" for memory-bound
// work (decode): the STREAM triad a[i] = b[i] + s·c[i] on FP64 arrays each larger than twice the
// last-level cache (at least 128 MiB), OpenMP static schedule on `threads` threads, best of 5 passes,
// counted as STREAM counts it: 3 × 8 bytes per element (two reads and one write; the write-allocate
// read is not counted, so the true traffic is higher and a kernel that only reads can exceed it).
#pragma once

#include <cstdint>
#include <string>

namespace qjoule::bench {

struct TriadBandwidth {
  double gb_per_s = 0.0;         // 1e9 bytes per second
  std::int64_t array_bytes = 0;  // bytes of each of the three arrays
  std::int64_t llc_bytes = 0;    // last-level cache size read from sysfs (0: unknown)
};

// Measured on first call for each thread count (a few seconds) and cached.
const TriadBandwidth& measured_triad(int threads);

std::string triad_method();

}  // namespace qjoule::bench

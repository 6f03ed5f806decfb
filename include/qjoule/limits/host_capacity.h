// What the host delivered around a measured run, beside the limits the run is compared with. A "% of
// limit" figure divides a run's speed by peaks measured once, on a quiet machine; on a shared host (a
// cloud VM whose cores' siblings run someone else's work, a laptop compiling in the background) a run
// can get half of that, and its low figure would then blame qjoule's kernel for the host's load. So a
// CPU run measures, right before and right after its timed windows, the FP32 FMA rate its cores give
// (cpu_peak.h's fp32_rate_now) and, over the windows, the CPU time that other processes and the
// hypervisor's steal took (cpu_contention.h); a decoder run also the memory's read bandwidth then
// (memory_bandwidth.h's read_rate_now), which on a shared host moves as much as the FMA rate. The run's
// figures stay as measured; what this changes is what a below-the-line figure is blamed on.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qjoule/limits/cpu_contention.h"

namespace qjoule::limits {

struct HostCapacity {
  int threads = 0;
  std::optional<double> fp32_gflops_before, fp32_gflops_after;  // fp32_rate_now around the windows
  std::optional<double> fp32_peak_gflops;                       // the limits' fp32 peak it is compared with
  double contending_cores = 0.0;                                // others' CPU time in the windows, in cores
  // Decoder runs: read_rate_now around the windows (memory_bandwidth.h), the bandwidth the decode had.
  std::optional<double> read_gb_per_s_before, read_gb_per_s_after;
};

// The better of the two read probes (the bandwidth the host gave beside the run); nullopt when neither ran.
std::optional<double> read_beside(const HostCapacity& h);
// Beyond this relative difference from the limits' read bandwidth, the read beside a run is said apart.
inline constexpr double kReadBesideTolerance = 0.15;

// The share of its measured compute the host delivered to the run: the lower of (the lower probe ÷
// the fp32 peak) and (1 − contending cores ÷ threads), at most 1; nullopt when neither was measured.
std::optional<double> delivered_fraction(const HostCapacity& h);

// Below this share the host counts as busy for the run.
inline constexpr double kBusyHostFraction = 0.8;

// "" when the host delivered at least kBusyHostFraction (or nothing was measured), else one line:
// "the host delivered 55% of its measured FP32 peak around this run (FMA probes 226 / 240 GFLOP/s of
// 411; other processes took 0.40 cores)".
std::string busy_host_line(const HostCapacity& h);

// Above this multiple of the limits' fp32 peak, a probe says the peak was measured low (the limits
// take the best of their trials, the probes the median of theirs: the probes should not exceed it).
inline constexpr double kLowPeakMultiple = 1.15;

// "" unless a probe read more than kLowPeakMultiple × the peak, else one line: "the FMA probes around
// this run read up to 458 GFLOP/s, 1.24x the limits' fp32 peak of 370: the limits were measured on a
// busier host, and this run's % roof figures read high".
std::string low_peak_line(const HostCapacity& h);

// {"threads", "fp32_gflops_before", "fp32_gflops_after", "fp32_peak_gflops", "contending_cores",
//  "delivered_fraction", "busy", "read_gb_per_s_before", "read_gb_per_s_after", "method"}: what a record
// keeps in environment.host_capacity.
nlohmann::json to_json(const HostCapacity& h);

// Measures when constructed (before a run's timed windows) and again in finish() (right after them);
// with read_bandwidth also the read probe (QJOULE_TEST_HOST_READ_GBPS=X: it reads X GB/s, not measured).
class HostCapacityProbe {
 public:
  explicit HostCapacityProbe(int threads, bool read_bandwidth = false);
  HostCapacity finish() const;  // fp32_peak_gflops not set: compared_with sets it

 private:
  int threads_;
  bool read_bandwidth_;
  std::optional<double> before_read_;
  std::optional<double> before_gflops_;
  std::optional<CpuTimes> before_times_;
};

// `h` against the limits' fp32 peak. QJOULE_TEST_HOST_CAPACITY=X (tests) stands for both probes'
// reading as X × the peak; the contention follows QJOULE_TEST_CONTENDED_CORES as the limits' own
// probe does.
HostCapacity compared_with(HostCapacity h, std::optional<double> fp32_peak_gflops);

}  // namespace qjoule::limits

// This CPU's measured arithmetic peak, the yardstick for "fraction of peak" in the benchmarks.
// Measured (not taken from a data sheet) with register-resident loops of independent dependency
// chains, on `threads` OpenMP threads at once:
//   fp32: 12 chains of vfmadd231ps ymm — 16 FLOP per instruction;
//   int8: 6 chains of vpmaddubsw → vpmaddwd(·, 1) → vpaddd, the sequence AVX2 (non-VNNI) int8 GEMMs
//         such as oneDNN's use — 32 u8×s8 multiply-adds = 64 OP per chain step.
// Both need AVX2 (+FMA); on a CPU without them the peak is reported as 0 (fraction unavailable).
#pragma once

#include <string>

namespace qjoule::bench {

struct CpuPeak {
  double fp32_gflops = 0.0;  // GFLOP/s, FMA = 2 FLOP
  double int8_gops = 0.0;    // GOP/s, multiply-add = 2 OP
};

// Measured on first call for each thread count (best of 7 short trials per loop, about 0.5 s in all)
// and cached.
const CpuPeak& measured_peak(int threads);

// How the peaks were measured, for the benchmark's context lines.
std::string peak_method();

}  // namespace qjoule::bench

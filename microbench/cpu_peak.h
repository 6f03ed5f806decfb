// This CPU's measured arithmetic peak, the yardstick for "fraction of peak" in the benchmarks.
// Measured (not taken from a data sheet) with register-resident loops of independent dependency
// chains, on `threads` OpenMP threads at once:
//   fp32: 12 chains of vfmadd231ps — zmm (32 FLOP per instruction) where AVX-512 is present, else
//         ymm (16 FLOP);
//   int8: with AVX512_VNNI, 12 chains of vpdpbusd zmm (64 u8×s8 multiply-adds = 128 OP); else 6
//         chains of vpmaddubsw → vpmaddwd(·, 1) → vpaddd ymm, the sequence AVX2 (non-VNNI) int8
//         GEMMs such as oneDNN's use (64 OP per chain step).
// The peak is that of the widest ISA oneDNN would use here. Without AVX2 (+FMA) the peak is
// reported as 0 (fraction unavailable).
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

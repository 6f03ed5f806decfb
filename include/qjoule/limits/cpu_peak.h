// This CPU's measured arithmetic peak per compute type, the roof of "fraction of the limit" for
// compute-bound work (prefill, encoder batches). Measured (not taken from a data sheet) with
// register-resident loops of independent dependency chains, on `threads` OpenMP threads at once:
//   fp32: 12 chains of vfmadd231ps: zmm (32 FLOP per instruction) where AVX-512 is present, else ymm
//         (16 FLOP);
//   bf16: with AVX512_BF16, 12 chains of vdpbf16ps zmm (32 BF16 pairs into 16 FP32 lanes = 64 FLOP);
//   int8: with AVX512_VNNI, 12 chains of vpdpbusd zmm (64 u8×s8 multiply-adds = 128 OP); else 6 chains
//         of vpmaddubsw → vpmaddwd(·, 1) → vpaddd ymm, the sequence AVX2 (non-VNNI) int8 GEMMs such as
//         oneDNN's use (64 OP per chain step).
// The peak is that of the widest ISA oneDNN would use here. A type this CPU has no instruction for is
// absent (nullopt) with the reason; AMX tiles are not measured (the reason says so where AMX is there).
#pragma once

#include <optional>
#include <string>

namespace qjoule::limits {

struct CpuPeak {
  std::optional<double> fp32_gflops;  // GFLOP/s, FMA = 2 FLOP
  std::optional<double> bf16_gflops;  // GFLOP/s, one BF16 product accumulated into FP32 = 2 FLOP
  std::optional<double> int8_gops;    // GOP/s, multiply-add = 2 OP
  std::string fp32_unavailable, bf16_unavailable, int8_unavailable;  // why a peak is absent
  std::string amx;                                                   // what about AMX tiles ("" = no AMX)
};

// Measured on first call for each thread count (best of 7 short trials per loop, about 0.5 s a type)
// and cached for the process.
const CpuPeak& measured_peak(int threads);

// How the peaks were measured, for records and the benchmarks' context lines.
std::string peak_method();

}  // namespace qjoule::limits

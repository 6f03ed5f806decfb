// This CPU's measured arithmetic peak per compute type, the roof of "fraction of the limit" for
// compute-bound work (prefill, encoder batches). Measured (not taken from a data sheet) with
// register-resident loops of independent dependency chains, on `threads` OpenMP threads at once:
//   fp32: 12 chains of vfmadd231ps: zmm (32 FLOP per instruction) where AVX-512 is present, else ymm
//         (16 FLOP);
//   bf16: with AVX512_BF16, 12 chains of vdpbf16ps zmm (32 BF16 pairs into 16 FP32 lanes = 64 FLOP);
//   int8: with AVX512_VNNI, 12 chains of vpdpbusd zmm (64 u8×s8 multiply-adds = 128 OP); else 6 chains
//         of vpmaddubsw → vpmaddwd(·, 1) → vpaddd ymm, the sequence AVX2 (non-VNNI) int8 GEMMs such as
//         oneDNN's use (64 OP per chain step).
//   amx_bf16 / amx_int8: with AMX (and Linux's permission for the tile state), 4 chains of tdpbf16ps /
//         tdpbusd on 16 × 64-byte tiles: what oneDNN's BF16 and INT8 matmuls run there instead of the
//         AVX-512 dot products.
// The peak is that of the widest ISA oneDNN would use here. A type this CPU has no instruction for is
// absent (nullopt) with the reason.
#pragma once

#include <optional>
#include <string>

namespace qjoule::limits {

struct CpuPeak {
  std::optional<double> fp32_gflops;  // GFLOP/s, FMA = 2 FLOP
  std::optional<double> bf16_gflops;  // GFLOP/s, one BF16 product accumulated into FP32 = 2 FLOP
  std::optional<double> int8_gops;    // GOP/s, multiply-add = 2 OP
  std::string fp32_unavailable, bf16_unavailable, int8_unavailable;  // why a peak is absent
  std::optional<double> amx_bf16_gflops;  // AMX-BF16 tiles, GFLOP/s (nullopt: no AMX, or not permitted)
  std::optional<double> amx_int8_gops;    // AMX-INT8 tiles (u8·s8), GOP/s
  std::string amx;                        // why AMX tiles that are present were not measured ("" = measured, or no AMX)
};

// Measured on first call for each thread count (best of 7 short trials per loop, about 0.5 s a type)
// and cached for the process.
const CpuPeak& measured_peak(int threads);

// The FP32 FMA rate this CPU delivers now on `threads` threads, in GFLOP/s: the fp32 peak's loop, the
// median of 5 trials of about 2 ms (not the best: this is what the host gives, not what it can give).
// A run compares it with its limits' fp32 peak to tell a busy host from a slow kernel (host_capacity.h).
// nullopt where this CPU has no FP32 peak loop.
std::optional<double> fp32_rate_now(int threads);

// How the peaks were measured, for records and the benchmarks' context lines.
std::string peak_method();

}  // namespace qjoule::limits

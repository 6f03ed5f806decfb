// AMX tile loops for the arithmetic peak (cpu_peak.cpp): what oneDNN's BF16 and INT8 matmuls run on a
// CPU with AMX (Sapphire Rapids and later), where their AVX-512 dot-product peaks are not the roof.
// Internal to qjoule_limits.
#pragma once

#include <string>

namespace qjoule::limits::amx {

// CPUID leaf 7, EDX: bit 24 AMX-TILE, 22 AMX-BF16, 25 AMX-INT8 (GCC 12's __builtin_cpu_supports does not
// know them).
bool has_tile();
bool has_bf16();
bool has_int8();

// Asks Linux for the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, XTILEDATA; once per process, every
// thread after it). "" when granted, else why not (a kernel before 5.16, a hypervisor that hides it).
std::string request_tile_permission();

// Each is one thread's loop of `steps` steps on register-resident tiles: tmm0..3 accumulate
// tmm4/5 × tmm6/7 (2 × 2 blocking, 4 independent chains), every tile 16 rows × 64 bytes.
//   bf16: 4 tdpbf16ps a step, each 16 × 16 FP32 outputs × 32 BF16 products = 16,384 FLOP;
//   int8: 4 tdpbusd a step, each 16 × 16 INT32 outputs × 64 u8·s8 products = 32,768 OP.
// The thread loads its tile configuration and releases the tiles before it returns. Needs
// request_tile_permission() to have succeeded.
inline constexpr double kBf16OpsPerStep = 4.0 * 16 * 16 * 32 * 2;
inline constexpr double kInt8OpsPerStep = 4.0 * 16 * 16 * 64 * 2;
void bf16_loop(long steps);
void int8_loop(long steps);

}  // namespace qjoule::limits::amx

// How close one measured phase came to what the machine allows: the roofline model. A phase did
// `flops_per_token` arithmetic and moved `bytes_per_token` from memory per token; at `tokens_per_s` it
// achieved flops_per_token × tokens_per_s FLOP/s. Its roof is the lower of the compute peak of the type
// its GEMMs ran in and intensity × the memory read bandwidth (intensity = FLOP per byte moved); the
// fraction is achieved over roof, and the bound says which roof applied.
#pragma once

#include <optional>
#include <string>

#include "qjoule/limits/machine_limits.h"

namespace qjoule::limits {

// The arithmetic a phase's GEMMs ran in: on the CPU fp32 (FMA), bf16 and int8 (dot products), and
// amx_bf16 / amx_int8 (AMX tile products, where oneDNN ran them); on a GPU also tf32, fp16 and fp8
// (E4M3) tensor-core products.
enum class ComputeType { fp32, bf16, int8, tf32, fp16, fp8, amx_bf16, amx_int8 };
std::string to_string(ComputeType type);  // "fp32", "bf16", "int8", "tf32", "fp16", "fp8", "amx_bf16", "amx_int8"
// The MachineLimits key of its peak ("int8_gops", "amx_bf16_gflops", ...) and its unit.
std::string peak_key(ComputeType type);
const char* peak_unit(ComputeType type);  // "GOP/s" for the integer types, else "GFLOP/s"

struct PhaseWork {
  double flops_per_token = 0.0;             // 2 per multiply-add
  double bytes_per_token = 0.0;             // bytes read from memory per token (weights per pass, KV cache, ...)
  ComputeType compute = ComputeType::fp32;  // the type of the GEMMs (the FLOP-weighted majority)
  // Of flops_per_token, the arithmetic that runs in FP32 whatever the GEMMs' type: attention's QKᵀ and
  // P·V (FP32 on both backends). Its time at the FP32 peak adds to the GEMMs' at theirs.
  double fp32_flops_per_token = 0.0;
};

struct RoofPoint {
  double achieved_gflops = 0.0;    // GFLOP/s (GOP/s for int8)
  double achieved_gb_per_s = 0.0;  // GB/s moved
  double intensity = 0.0;          // FLOP per byte
  // min(compute roof, intensity × read bandwidth); the compute roof is the GEMMs' peak, or where part
  // of the work runs in FP32 beside GEMMs of another type, flops ÷ (the GEMMs' flops at their peak +
  // the FP32 flops at the FP32 peak): the rate of the whole mix.
  double roof_gflops = 0.0;
  double fraction = 0.0;  // achieved / roof
  // "memory: read 38.2 GB/s", "compute: fp32 412 GFLOP/s", or for a mix "compute: int8 1619 GOP/s
  // (GEMMs) + fp32 412 GFLOP/s (attention, 9% of the FLOPs): 1215 for the mix"
  std::string bound;
};

// The phase's point, or nullopt with `why` set (no throughput, no work, a limit not measured).
std::optional<RoofPoint> roof_point(const PhaseWork& work, double tokens_per_s, const MachineLimits& limits,
                                    std::string& why);

// A memory-bound phase (decode): bytes_per_token × tokens_per_s over the memory bandwidth, or nullopt
// with `why` set (no bandwidth measured, no throughput).
std::optional<double> memory_fraction(double bytes_per_token, double tokens_per_s, const MachineLimits& limits,
                                      std::string& why);
// "memory: read 24.6 GB/s" (CPU) or "memory: device copy 3008.8 GB/s" (GPU): the memory roof applied.
std::string memory_bound_text(const MachineLimits& limits);

// Below this fraction of its roof a figure says more about qjoule's kernel than about the hardware or
// the format: the report flags it.
inline constexpr double kRoofWarningFraction = 0.30;

}  // namespace qjoule::limits

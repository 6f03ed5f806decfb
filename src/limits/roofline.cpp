#include "qjoule/limits/roofline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace qjoule::limits {

std::string to_string(ComputeType type) {
  switch (type) {
    case ComputeType::bf16: return "bf16";
    case ComputeType::int8: return "int8";
    case ComputeType::tf32: return "tf32";
    case ComputeType::fp16: return "fp16";
    case ComputeType::fp8: return "fp8";
    case ComputeType::amx_bf16: return "amx_bf16";
    case ComputeType::amx_int8: return "amx_int8";
    case ComputeType::fp32: break;
  }
  return "fp32";
}

bool is_integer(ComputeType type) { return type == ComputeType::int8 || type == ComputeType::amx_int8; }

std::string peak_key(ComputeType type) { return to_string(type) + (is_integer(type) ? "_gops" : "_gflops"); }

const char* peak_unit(ComputeType type) { return is_integer(type) ? "GOP/s" : "GFLOP/s"; }

namespace {
// Why the limits have no `key` figure: their `unavailable` entry, else "not measured".
std::string absent_because(const MachineLimits& limits, const std::string& key) {
  return limits.unavailable.contains(key) ? limits.unavailable.at(key).get<std::string>() : "not measured";
}
}  // namespace

std::optional<RoofPoint> roof_point(const PhaseWork& work, double tokens_per_s, const MachineLimits& limits,
                                    std::string& why) {
  if (!(tokens_per_s > 0.0) || !std::isfinite(tokens_per_s)) {
    why = "no throughput measured";
    return std::nullopt;
  }
  if (!(work.flops_per_token > 0.0) || !(work.bytes_per_token > 0.0)) {
    why = "the phase's work is unknown";
    return std::nullopt;
  }
  if (!limits.read_gb_per_s) {
    why = "the memory bandwidth was not measured";
    return std::nullopt;
  }
  const std::string key = peak_key(work.compute);
  const std::optional<double>& peak = limits.figure(key);
  if (!peak) {
    why = fmt::format("no {} peak on this machine ({})", to_string(work.compute), absent_because(limits, key));
    return std::nullopt;
  }
  // Attention's FP32 arithmetic beside GEMMs of another type: its time at the FP32 peak adds to theirs.
  const bool mixed = work.compute != ComputeType::fp32 && work.fp32_flops_per_token > 0.0;
  const std::optional<double>& fp32_peak = limits.fp32_gflops;
  if (mixed && !fp32_peak) {
    why = fmt::format("no fp32 peak on this machine for the attention beside the {} GEMMs ({})",
                      to_string(work.compute), absent_because(limits, "fp32_gflops"));
    return std::nullopt;
  }
  double compute_roof = *peak;
  if (mixed) {
    const double fp32 = std::min(work.fp32_flops_per_token, work.flops_per_token);
    compute_roof = work.flops_per_token / ((work.flops_per_token - fp32) / *peak + fp32 / *fp32_peak);
  }
  RoofPoint p;
  p.achieved_gflops = work.flops_per_token * tokens_per_s / 1e9;
  p.achieved_gb_per_s = work.bytes_per_token * tokens_per_s / 1e9;
  p.intensity = work.flops_per_token / work.bytes_per_token;
  const double memory_roof = p.intensity * *limits.read_gb_per_s;
  if (memory_roof < compute_roof) {
    p.roof_gflops = memory_roof;
    p.bound = memory_bound_text(limits);
  } else {
    p.roof_gflops = compute_roof;
    p.bound = fmt::format("compute: {} {:.0f} {}", to_string(work.compute), *peak, peak_unit(work.compute));
    if (mixed)
      p.bound += fmt::format(" (GEMMs) + fp32 {:.0f} GFLOP/s (attention, {:.0f}% of the FLOPs): {:.0f} for the mix",
                             *fp32_peak, 100.0 * work.fp32_flops_per_token / work.flops_per_token, compute_roof);
  }
  p.fraction = p.achieved_gflops / p.roof_gflops;
  return p;
}

std::optional<double> memory_fraction(double bytes_per_token, double tokens_per_s, const MachineLimits& limits,
                                      std::string& why) {
  if (!limits.read_gb_per_s) {
    why = "the memory bandwidth was not measured";
    return std::nullopt;
  }
  if (!(tokens_per_s > 0.0) || !std::isfinite(tokens_per_s)) {
    why = "no throughput measured";
    return std::nullopt;
  }
  return bytes_per_token * tokens_per_s / 1e9 / *limits.read_gb_per_s;
}

std::string memory_bound_text(const MachineLimits& limits) {
  return fmt::format("memory: {} {:.1f} GB/s", limits.memory_label(), limits.read_gb_per_s.value_or(0.0));
}

}  // namespace qjoule::limits

// A record against the machine's measured limits: the limits in its environment (machine_limits,
// with where they came from) and each measured phase's roof figures (roof_* for an encoder's batches
// or a decoder's prefill, decode_roof_* for its decode steps); on a GPU, or where a figure is missing,
// roof_unavailable says why.
#pragma once

#include <optional>
#include <string>

#include "qjoule/bench/run_record.h"
#include "qjoule/limits/host_capacity.h"
#include "qjoule/limits/limits_cache.h"
#include "qjoule/limits/roofline.h"

namespace qjoule::bench {

void record_machine_limits(RunRecord& r, const limits::CachedLimits& limits);

// The measured phase at `tokens_per_s` (roof_*), or roof_unavailable with the reason.
void record_roofline(RunRecord& r, const limits::MachineLimits& limits, const limits::PhaseWork& work,
                     double tokens_per_s);

// A decoder's decode phase: bytes per generated token over the read bandwidth (decode_roof_*); above
// kAboveRoofFraction of it, a note says the bandwidth read low or the weights were cached.
inline constexpr double kAboveRoofFraction = 1.05;
void record_decode_roofline(RunRecord& r, const limits::MachineLimits& limits, double flops_per_token,
                            double bytes_per_token, double tokens_per_s);

// What the host delivered around a CPU run's timed windows, against the limits' fp32 peak:
// environment.host_capacity, and a note when the host was busy (its speed and % roof figures may be low).
// A decoder's also the decode's read against the bandwidth its read probes gave (read_beside):
// environment.host_capacity.decode_roof_fraction_beside, and a note when that bandwidth is more than
// limits::kReadBesideTolerance off the limits' (the record's decode_roof_fraction then blames or flatters the kernel
// for the host's memory). record_host_capacity calls it; decode_roof_* must be set first.
void record_host_capacity(RunRecord& r, const limits::HostCapacity& measured, const limits::MachineLimits& limits);
void record_decode_read_beside(RunRecord& r, const limits::HostCapacity& h, const limits::MachineLimits& limits);

}  // namespace qjoule::bench

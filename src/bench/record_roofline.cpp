#include "bench/record_roofline.h"

#include <cmath>

#include <fmt/format.h>

namespace qjoule::bench {

void record_machine_limits(RunRecord& r, const limits::CachedLimits& limits) {
  nlohmann::json j = limits::to_json(limits.limits);
  j["source"] = limits.note;
  r.environment["machine_limits"] = std::move(j);
  if (!limits.limits.contention.empty())
    r.notes.push_back("machine limits: " + limits.limits.contention +
                      " (they may be low, and this run's % roof figures high)");
}

void record_roofline(RunRecord& r, const limits::MachineLimits& limits, const limits::PhaseWork& work,
                     double tokens_per_s) {
  r.roof_flops_per_token = work.flops_per_token;
  r.roof_bytes_per_token = work.bytes_per_token;
  std::string why;
  const auto point = limits::roof_point(work, tokens_per_s, limits, why);
  if (!point) {
    r.roof_unavailable = why;
    return;
  }
  r.roof_gflops = point->achieved_gflops;
  r.roof_gb_per_s = point->achieved_gb_per_s;
  r.roof_limit_gflops = point->roof_gflops;
  r.roof_fraction = point->fraction;
  r.roof_bound = point->bound;
}

void record_decode_roofline(RunRecord& r, const limits::MachineLimits& limits, double flops_per_token,
                            double bytes_per_token, double tokens_per_s) {
  r.decode_roof_flops_per_token = flops_per_token;
  r.decode_roof_bytes_per_token = bytes_per_token;
  std::string why;
  r.decode_roof_fraction = limits::memory_fraction(bytes_per_token, tokens_per_s, limits, why);
  if (!r.decode_roof_fraction) return;
  r.decode_roof_gb_per_s = bytes_per_token * tokens_per_s / 1e9;
  r.decode_roof_bound = limits::memory_bound_text(limits);
  // Above the roof: the bandwidth was measured low (a busy host when the limits were taken), or the
  // weights sat in the caches (a model smaller than the last-level cache). Said, not clipped.
  if (*r.decode_roof_fraction > kAboveRoofFraction)
    r.notes.push_back(fmt::format(
        "decode read {:.1f} GB/s, {:.0f}% of the limits' read bandwidth ({:.1f} GB/s): the bandwidth was measured "
        "low (`qjoule limits --refresh` on a quiet machine), or the weights were in the caches",
        *r.decode_roof_gb_per_s, 100.0 * *r.decode_roof_fraction, limits.read_gb_per_s.value_or(0.0)));
}

void record_host_capacity(RunRecord& r, const limits::HostCapacity& measured, const limits::MachineLimits& limits) {
  const limits::HostCapacity h = limits::compared_with(measured, limits.fp32_gflops);
  r.environment["host_capacity"] = limits::to_json(h);
  if (const std::string busy = limits::busy_host_line(h); !busy.empty())
    r.notes.push_back("busy host: " + busy + " (this run's speed and % roof figures may be low for that reason)");
  if (const std::string low = limits::low_peak_line(h); !low.empty())
    r.notes.push_back("machine limits: " + low + " (`qjoule limits --refresh` on a quiet machine)");
  record_decode_read_beside(r, h, limits);
}

void record_decode_read_beside(RunRecord& r, const limits::HostCapacity& h, const limits::MachineLimits& limits) {
  const auto beside = limits::read_beside(h);
  if (!beside || !r.decode_roof_gb_per_s || !(*beside > 0.0)) return;
  const double fraction = *r.decode_roof_gb_per_s / *beside;
  r.environment["host_capacity"]["decode_roof_fraction_beside"] = fraction;
  const double limit = limits.read_gb_per_s.value_or(0.0);
  if (!(limit > 0.0) || std::abs(*beside / limit - 1.0) <= limits::kReadBesideTolerance) return;
  const auto probe = [](const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : std::string("-"); };
  r.notes.push_back(fmt::format(
      "decode read {:.1f} GB/s: {:.0f}% of the limits' read bandwidth ({:.1f} GB/s) and {:.0f}% of the {:.1f} GB/s the "
      "host gave beside this run (read probes {} / {} GB/s right before / after its windows): the host's memory ran "
      "{} than when the limits were measured",
      *r.decode_roof_gb_per_s, 100.0 * *r.decode_roof_gb_per_s / limit, limit, 100.0 * fraction, *beside,
      probe(h.read_gb_per_s_before), probe(h.read_gb_per_s_after), *beside > limit ? "faster" : "slower"));
}

}  // namespace qjoule::bench

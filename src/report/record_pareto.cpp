#include "qjoule/report/record_pareto.h"

#include <optional>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/report/pareto.h"

namespace qjoule::report {
namespace {

bool is_fp32(const bench::RunRecord& r) {
  const auto spec = quant::try_parse_format_spec(r.config.precision);
  return spec && spec->format == quant::Format::fp32;
}

std::optional<double> agreement_of(const bench::RunRecord& r) {
  if (r.fidelity_top1_agreement) return r.fidelity_top1_agreement;
  if (is_fp32(r)) return 1.0;  // the reference agrees with itself
  return std::nullopt;
}

}  // namespace

RecordPareto pareto_of_records(const std::vector<bench::RunRecord>& records) {
  RecordPareto p;
  p.cost_is_energy = false;
  p.quality_is_accuracy = false;
  for (const auto& r : records) {
    if (r.status != "ok" || r.not_representative) continue;
    p.cost_is_energy = p.cost_is_energy || r.energy_j_per_inference.has_value();
    p.quality_is_accuracy = p.quality_is_accuracy || r.accuracy.has_value();
  }
  p.cost_label = p.cost_is_energy ? "energy per inference (J)" : "p50 latency per batch (ms)";
  p.quality_label = p.quality_is_accuracy ? "accuracy (%)" : "top-1 agreement with FP32 (%)";

  std::vector<ParetoPoint> points;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const auto why_not = [&](const char* reason) { p.left_out.push_back(fmt::format("{}: {}", r.run_name, reason)); };
    if (r.status != "ok") {
      why_not("failed");
      continue;
    }
    if (r.not_representative) {
      why_not("emulated: its latency and energy are not representative");
      continue;
    }
    // Plain doubles with flags: GCC 12 warns (maybe-uninitialized) on optionals picked by a ternary.
    double cost = 0, quality = 0;
    bool has_cost = false, has_quality = false;
    if (p.cost_is_energy && r.energy_j_per_inference) {
      cost = *r.energy_j_per_inference;
      has_cost = true;
    } else if (!p.cost_is_energy && r.latency) {
      cost = r.latency->p50_ms;
      has_cost = true;
    }
    const std::optional<double> q = p.quality_is_accuracy ? r.accuracy : agreement_of(r);
    if (q) {
      quality = *q * 100;
      has_quality = true;
    }
    if (!has_cost) {
      why_not(p.cost_is_energy ? "energy unavailable" : "no latency");
      continue;
    }
    if (!has_quality) {
      why_not(p.quality_is_accuracy ? "no accuracy" : "no agreement with FP32");
      continue;
    }
    p.candidates.push_back(i);
    p.cost.push_back(cost);
    p.quality.push_back(quality);
    points.push_back({cost, quality});
  }
  for (const std::size_t k : pareto_frontier(points)) p.frontier.push_back(p.candidates[k]);
  return p;
}

}  // namespace qjoule::report

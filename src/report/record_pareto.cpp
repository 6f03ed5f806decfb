#include "qjoule/report/record_pareto.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/quant/precision.h"
#include "qjoule/report/pareto.h"

namespace qjoule::report {
namespace {

bool is_fp32(const bench::RunRecord& r) {
  const auto& spec = r.config.precision.spec();
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

bool is_decoder_sweep(const std::vector<bench::RunRecord>& records) {
  bool any = false;
  for (const auto& r : records) {
    if (r.status != "ok") continue;
    if (!r.decode_tokens) return false;
    any = true;
  }
  return any;
}

std::vector<DecoderPareto> decoder_paretos(const std::vector<bench::RunRecord>& records) {
  const bool by_ppl = std::any_of(records.begin(), records.end(),
                                  [](const bench::RunRecord& r) { return r.status == "ok" && r.lm_ppl.has_value(); });
  std::string text;
  for (const auto& r : records)
    if (r.lm_ppl && text.empty()) text = r.lm_text;
  const std::string y_label = by_ppl ? fmt::format("perplexity on {}", text) : "top-1 agreement with FP32 (%)";
  const auto quality = [&](const bench::RunRecord& r) -> std::optional<double> {
    if (by_ppl) return r.lm_ppl;
    const auto a = agreement_of(r);
    if (!a) return std::nullopt;
    return *a * 100;
  };
  std::string energy_reason;
  bool any_energy = false;
  for (const auto& r : records) {
    if (r.status != "ok") continue;
    any_energy = any_energy || r.decode_mj_per_token.has_value();
    if (energy_reason.empty() && !r.decode_energy_unavailable.empty()) energy_reason = r.decode_energy_unavailable;
  }

  std::vector<DecoderPareto> out(2);
  out[0].id = "chart-pareto-decode-speed";
  out[0].x_label = "decode tokens/s";
  out[1].id = "chart-pareto-decode-energy";
  out[1].x_label = "decode energy (mJ/token)";
  out[1].x_higher_is_better = false;
  for (auto& p : out) {
    p.y_label = y_label;
    p.y_lower_is_better = by_ppl;
    p.title = fmt::format("{} vs {} — Pareto frontier", by_ppl ? "Perplexity" : "Agreement with FP32", p.x_label);
  }
  if (!any_energy)
    out[1].unavailable = fmt::format("no run has decode energy{}", energy_reason.empty() ? "" : ": " + energy_reason);

  for (std::size_t n = 0; n < out.size(); ++n) {
    auto& p = out[n];
    if (!p.unavailable.empty()) continue;
    std::vector<ParetoPoint> points;
    for (std::size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      const auto why_not = [&](const std::string& reason) {
        p.left_out.push_back(fmt::format("{}: {}", r.run_name, reason));
      };
      if (r.status != "ok") {
        why_not("failed");
        continue;
      }
      if (r.not_representative) {
        why_not("emulated: its speed and energy are not representative");
        continue;
      }
      const std::optional<double> x = n == 0 ? r.decode_tokens_per_s_mean : r.decode_mj_per_token;
      const std::optional<double> y = quality(r);
      if (!x) {
        why_not(n == 0 ? "no decode speed" : "decode energy unavailable");
        continue;
      }
      if (!y) {
        why_not(by_ppl ? "no perplexity (no --text)" : "no agreement with FP32");
        continue;
      }
      p.candidates.push_back(i);
      p.x.push_back(*x);
      p.y.push_back(*y);
      points.push_back({p.x_higher_is_better ? -*x : *x, p.y_lower_is_better ? -*y : *y});
    }
    for (const std::size_t k : pareto_frontier(points)) p.frontier.push_back(p.candidates[k]);
  }
  return out;
}

}  // namespace qjoule::report

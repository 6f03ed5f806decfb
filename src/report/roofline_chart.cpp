#include "qjoule/report/roofline_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

namespace qjoule::report {
namespace {

using bench::RunRecord;
using nlohmann::json;

constexpr const char* kPointColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                        "#9467bd", "#8c564b", "#e377c2", "#17becf"};

json point(double intensity, double gflops, const std::string& name) {
  return {{"x", intensity}, {"y", gflops}, {"name", name}};
}

json roof_dataset(const std::string& label, json points, const char* color, bool dashed) {
  json d = {{"label", label},   {"data", std::move(points)}, {"showLine", true},   {"fill", false},
            {"pointRadius", 0}, {"borderColor", color},      {"borderWidth", 1.5}, {"order", 1}};
  if (dashed) d["borderDash"] = json::array({6, 4});
  return d;
}

}  // namespace

ReportChart roofline_chart(const std::vector<RunRecord>& records) {
  ReportChart chart{"chart-roofline", "Roofline: achieved rate against the machine's measured limits", nullptr, {}};
  // One dataset per precision; a decoder's decode steps are a point of their own ("… decode").
  std::map<std::string, json> by_label;
  std::vector<std::string> order, without;
  double lo = 1e300, hi = 0.0;
  const json* limits = nullptr;
  const auto add = [&](const std::string& label, double intensity, double gflops, const std::string& name) {
    if (!by_label.contains(label)) order.push_back(label), by_label[label] = json::array();
    by_label[label].push_back(point(intensity, gflops, name));
    lo = std::min(lo, intensity);
    hi = std::max(hi, intensity);
  };
  for (const auto& r : records) {
    if (r.status != "ok") continue;
    if (!r.roof_gflops || !r.roof_flops_per_token || !r.roof_bytes_per_token || *r.roof_bytes_per_token <= 0) {
      without.push_back(fmt::format("{} ({})", r.run_name,
                                    r.roof_unavailable.empty() ? "no roof figures in its record" : r.roof_unavailable));
      continue;
    }
    if (!limits && r.environment.contains("machine_limits")) limits = &r.environment["machine_limits"];
    add(r.config.precision.text() + (r.decode_tokens ? " prefill" : ""),
        *r.roof_flops_per_token / *r.roof_bytes_per_token, *r.roof_gflops, r.run_name);
    if (r.decode_roof_flops_per_token && r.decode_roof_bytes_per_token && r.decode_tokens_per_s_mean &&
        *r.decode_roof_bytes_per_token > 0)
      add(r.config.precision.text() + " decode", *r.decode_roof_flops_per_token / *r.decode_roof_bytes_per_token,
          *r.decode_roof_flops_per_token * *r.decode_tokens_per_s_mean / 1e9, r.run_name + " (decode)");
  }
  if (by_label.empty()) {
    chart.notes.push_back("No run has roof figures (CPU runs of qjoule bench record them; GPU runs do not yet).");
    chart.notes.insert(chart.notes.end(), without.begin(), without.end());
    return chart;
  }
  json datasets = json::array();
  std::size_t color = 0;
  for (const auto& label : order)
    datasets.push_back({{"label", label},
                        {"data", by_label[label]},
                        {"pointRadius", 5},
                        {"backgroundColor", kPointColors[color++ % std::size(kPointColors)]},
                        {"order", 0}});
  // The roofs over the points' span (a decade either side).
  const double x0 = lo / 10.0, x1 = hi * 10.0;
  if (limits) {
    const auto& l = *limits;
    if (l.contains("read_gb_per_s") && l["read_gb_per_s"].is_number()) {
      const double bw = l["read_gb_per_s"].get<double>();
      datasets.push_back(roof_dataset(fmt::format("memory read {:.1f} GB/s", bw),
                                      json::array({point(x0, bw * x0, ""), point(x1, bw * x1, "")}), "#444444", false));
    }
    const std::pair<const char*, const char*> peaks[] = {{"fp32_gflops", "fp32 FMA"},
                                                         {"bf16_gflops", "bf16 dot"},
                                                         {"int8_gops", "int8 dot"},
                                                         {"amx_bf16_gflops", "AMX bf16"},
                                                         {"amx_int8_gops", "AMX int8"}};
    for (const auto& [key, name] : peaks) {
      if (!l.contains(key) || !l[key].is_number()) continue;
      const double peak = l[key].get<double>();
      datasets.push_back(roof_dataset(fmt::format("{} peak {:.0f}", name, peak),
                                      json::array({point(x0, peak, ""), point(x1, peak, "")}), "#888888", true));
    }
    chart.notes.push_back(fmt::format("Roofs measured with {} threads ({}).", l.value("threads", 0),
                                      l.value("source", std::string("environment.machine_limits"))));
  }
  const auto log_axis = [](const std::string& title) {
    return json{{"type", "logarithmic"}, {"title", {{"display", true}, {"text", title}}}};
  };
  chart.config = {
      {"type", "scatter"},
      {"data", {{"datasets", std::move(datasets)}}},
      {"options",
       {{"animation", false},
        {"responsive", true},
        {"maintainAspectRatio", false},
        {"plugins", {{"title", {{"display", true}, {"text", chart.title}}}, {"legend", {{"position", "bottom"}}}}},
        {"scales",
         {{"x", log_axis("arithmetic intensity (FLOP per byte read)")},
          {"y", log_axis("achieved GFLOP/s (GOP/s for int8)")}}}}}};
  if (!without.empty()) {
    chart.notes.push_back("Not drawn:");
    chart.notes.insert(chart.notes.end(), without.begin(), without.end());
  }
  return chart;
}

}  // namespace qjoule::report

#include "qjoule/report/report_charts.h"
#include "qjoule/report/roofline_chart.h"
#include "report/chart_builders.h"
#include "report/decoder_speed_charts.h"
#include "report/quality_delta_charts.h"
#include "report/unavailable_by_reason.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::report {
namespace {

using bench::RunRecord;
using nlohmann::json;

using namespace chart_builders;  // NOLINT: the chart helpers shared with decoder_speed_charts.cpp

ReportChart latency_chart(const std::vector<const RunRecord*>& runs) {
  ReportChart chart{"chart-latency", "Latency per run (ms per batch): p50 bars, p90 and p99 markers", nullptr, {}};
  const Variation v = variation_of(runs);
  json labels = json::array(), p50 = json::array(), p90 = json::array(), p99 = json::array();
  for (const auto* r : runs) {
    if (!r->latency) continue;
    labels.push_back(run_label(*r, v));
    p50.push_back(r->latency->p50_ms);
    p90.push_back(r->latency->p90_ms);
    p99.push_back(r->latency->p99_ms);
  }
  if (labels.empty()) {
    chart.notes.push_back("No run has latency.");
    return chart;
  }
  json data = {{"labels", labels},
               {"datasets",
                {bar_dataset("p50", p50, 0),
                 {{"type", "line"},
                  {"label", "p90"},
                  {"data", p90},
                  {"showLine", false},
                  {"pointStyle", "line"},
                  {"pointRadius", 12},
                  {"borderWidth", 3},
                  {"borderColor", color(1)},
                  {"backgroundColor", color(1)}},
                 {{"type", "line"},
                  {"label", "p99"},
                  {"data", p99},
                  {"showLine", false},
                  {"pointStyle", "triangle"},
                  {"pointRadius", 6},
                  {"borderColor", color(3)},
                  {"backgroundColor", color(3)}}}}};
  chart.config = chart_config("bar", chart.title, std::move(data), axis("run", "category"), axis("ms per batch"));
  if (std::any_of(runs.begin(), runs.end(), [](const RunRecord* r) { return r->not_representative; }))
    chart.notes.push_back("* emulated format: its latency is not representative.");
  return chart;
}

ReportChart throughput_chart(const std::vector<const RunRecord*>& runs) {
  ReportChart chart{"chart-throughput", "Throughput per precision (sequences/s)", nullptr, {}};
  json data = per_precision_data(runs, {{"", [](const RunRecord& r) { return r.sequences_per_s; }}}, "sequences/s");
  if (!has_values(data)) {
    chart.notes.push_back("No run has a throughput.");
    return chart;
  }
  chart.config = chart_config("bar", chart.title, std::move(data), axis("precision", "category"), axis("sequences/s"));
  return chart;
}

double sequences_of(const RunRecord& r) { return static_cast<double>(r.iters) * static_cast<double>(r.config.batch); }

ReportChart energy_chart(const std::vector<const RunRecord*>& runs) {
  ReportChart chart{"chart-energy", "Energy per inference per precision (J per sequence)", nullptr, {}};
  std::vector<std::string> estimated;
  std::vector<std::pair<std::string, std::string>> without;  // (run, why), said once per reason
  bool any_net = false;
  for (const auto* r : runs) {
    if (!r->energy_j_per_inference)
      without.emplace_back(r->run_name, r->energy_unavailable.empty() ? "no reason recorded" : r->energy_unavailable);
    else if (r->energy_method.rfind("estimated", 0) == 0)
      estimated.push_back(r->run_name);
    any_net = any_net || (r->energy_net_j && r->energy_j_per_inference);
  }
  // Per sequence from the window's totals; else the recorded J/inference (net with an idle baseline).
  const Metric gross = [](const RunRecord& r) -> std::optional<double> {
    if (!r.energy_j_per_inference) return std::nullopt;
    if (r.energy_j && sequences_of(r) > 0) return *r.energy_j / sequences_of(r);
    return r.energy_net_j ? std::nullopt : r.energy_j_per_inference;
  };
  const Metric net = [](const RunRecord& r) -> std::optional<double> {
    if (!r.energy_j_per_inference || !r.energy_net_j) return std::nullopt;
    return sequences_of(r) > 0 ? std::optional<double>(*r.energy_net_j / sequences_of(r)) : r.energy_j_per_inference;
  };
  const std::vector<std::string> unavailable = unavailable_by_reason(without);
  std::vector<std::pair<std::string, Metric>> metrics = {{any_net ? "gross" : "", gross}};
  if (any_net) metrics.push_back({"net of idle", net});
  json data = per_precision_data(runs, metrics, "J per sequence");
  const bool drawn = has_values(data);
  if (!drawn || !unavailable.empty())
    chart.notes.push_back(drawn ? "Not drawn (no bar, not 0):"
                                : "Energy unavailable for every run, so nothing is drawn:");
  chart.notes.insert(chart.notes.end(), unavailable.begin(), unavailable.end());
  if (!drawn) return chart;
  chart.config =
      chart_config("bar", chart.title, std::move(data), axis("precision", "category"), axis("J per sequence"));
  if (!estimated.empty())
    chart.notes.push_back(fmt::format("Estimated, not measured: {}.", fmt::join(estimated, ", ")));
  return chart;
}

ReportChart accuracy_chart(const std::vector<const RunRecord*>& runs, bool by_accuracy) {
  ReportChart chart{
      "chart-accuracy",
      by_accuracy ? "Accuracy per precision (%)" : "Top-1 agreement with FP32 per precision (%) — no labelled dataset",
      nullptr,
      {}};
  const Metric metric = [by_accuracy](const RunRecord& r) -> std::optional<double> {
    const auto value = by_accuracy ? r.accuracy : r.fidelity_top1_agreement;
    return value ? std::optional<double>(*value * 100) : std::nullopt;
  };
  json data = per_precision_data(runs, {{"", metric}}, by_accuracy ? "accuracy (%)" : "agreement (%)");
  if (!has_values(data)) {
    chart.notes.push_back("No run has an accuracy or an agreement with FP32.");
    return chart;
  }
  chart.config = chart_config("bar", chart.title, std::move(data), axis("precision", "category"),
                              axis(by_accuracy ? "accuracy (%)" : "agreement (%)"));
  return chart;
}

// A scatter of every run with the frontier drawn over it as a line.
json pareto_data(json frontier, json runs) {
  return {{"datasets",
           {{{"label", "Pareto frontier"},
             {"data", std::move(frontier)},
             {"showLine", true},
             {"borderColor", color(3)},
             {"backgroundColor", color(3)},
             {"pointRadius", 7},
             {"borderWidth", 2}},
            {{"label", "runs"},
             {"data", std::move(runs)},
             {"borderColor", color(0)},
             {"backgroundColor", color(0)},
             {"pointRadius", 4}}}}};
}

ReportChart pareto_chart(const std::vector<RunRecord>& records, const RecordPareto& pareto) {
  ReportChart chart{"chart-pareto",
                    pareto.cost_is_energy
                        ? fmt::format("Energy per inference vs {} — Pareto frontier",
                                      pareto.quality_is_accuracy ? "accuracy" : "agreement with FP32")
                        : fmt::format("p50 latency vs {} (no run has energy: latency stands in) — Pareto frontier",
                                      pareto.quality_is_accuracy ? "accuracy" : "agreement with FP32"),
                    nullptr,
                    {}};
  if (pareto.candidates.empty()) {
    chart.notes.push_back("No run has both values to compare.");
    chart.notes.insert(chart.notes.end(), pareto.left_out.begin(), pareto.left_out.end());
    return chart;
  }
  const auto point = [&](std::size_t k) {
    return json{{"x", pareto.cost[k]}, {"y", pareto.quality[k]}, {"name", records[pareto.candidates[k]].run_name}};
  };
  json runs = json::array(), frontier = json::array();
  for (std::size_t k = 0; k < pareto.candidates.size(); ++k) runs.push_back(point(k));
  for (const std::size_t index : pareto.frontier) {
    const auto k = static_cast<std::size_t>(std::find(pareto.candidates.begin(), pareto.candidates.end(), index) -
                                            pareto.candidates.begin());
    frontier.push_back(point(k));
  }
  json data = pareto_data(std::move(frontier), std::move(runs));
  chart.config =
      chart_config("scatter", chart.title, std::move(data), axis(pareto.cost_label), axis(pareto.quality_label));
  if (!pareto.left_out.empty()) {
    chart.notes.push_back("Not compared:");
    chart.notes.insert(chart.notes.end(), pareto.left_out.begin(), pareto.left_out.end());
  }
  return chart;
}

// A decoder sweep's trade-off: every run and the frontier, the frontier named in a note.
ReportChart decoder_pareto_chart(const std::vector<RunRecord>& records, const DecoderPareto& pareto) {
  ReportChart chart{pareto.id, pareto.title, nullptr, {}};
  if (!pareto.unavailable.empty()) {
    chart.notes.push_back("Not drawn: " + pareto.unavailable + ".");
    return chart;
  }
  if (pareto.candidates.empty()) {
    chart.notes.push_back("No run has both values to compare.");
    chart.notes.insert(chart.notes.end(), pareto.left_out.begin(), pareto.left_out.end());
    return chart;
  }
  const auto k_of = [&](std::size_t index) {
    return static_cast<std::size_t>(std::find(pareto.candidates.begin(), pareto.candidates.end(), index) -
                                    pareto.candidates.begin());
  };
  const auto point = [&](std::size_t k) {
    return json{{"x", pareto.x[k]}, {"y", pareto.y[k]}, {"name", records[pareto.candidates[k]].run_name}};
  };
  json runs = json::array(), frontier = json::array();
  for (std::size_t k = 0; k < pareto.candidates.size(); ++k) runs.push_back(point(k));
  std::string named;
  for (const std::size_t index : pareto.frontier) {
    const auto k = k_of(index);
    frontier.push_back(point(k));
    named += fmt::format("{}{} ({:.4g}, {:.4g})", named.empty() ? "" : ", ", records[index].run_name, pareto.x[k],
                         pareto.y[k]);
  }
  json data = pareto_data(std::move(frontier), std::move(runs));
  chart.config = chart_config("scatter", chart.title, std::move(data), axis(pareto.x_label), axis(pareto.y_label));
  chart.notes.push_back(fmt::format("Frontier ({} is better, {} is better): {}.",
                                    pareto.x_higher_is_better ? "right" : "left",
                                    pareto.y_lower_is_better ? "lower" : "higher", named));
  if (!pareto.left_out.empty()) {
    chart.notes.push_back("Not compared:");
    chart.notes.insert(chart.notes.end(), pareto.left_out.begin(), pareto.left_out.end());
  }
  return chart;
}

// A line per series: x = `x_of` (batch or seq), y = metric; the series groups runs whose other
// keys (precision, and whatever else varies) are equal.
// A decoder sweep: decode tokens/s over batch, its prefill's p50 over prompt length.
ReportChart scaling_chart(const std::vector<const RunRecord*>& runs, bool over_batch, bool decoder) {
  const std::string what = over_batch ? "batch size" : decoder ? "prompt length" : "sequence length";
  ReportChart chart{over_batch ? "chart-batch-scaling" : "chart-seq-scaling",
                    over_batch ? decoder ? "Batch scaling: decode throughput (tokens/s) vs batch size per precision"
                                         : "Batch scaling: throughput (sequences/s) vs batch size per precision"
                    : decoder  ? "Prompt-length scaling: prefill p50 latency (ms) vs prompt length per precision"
                               : "Sequence-length scaling: p50 latency (ms) vs sequence length per precision",
                    nullptr,
                    {}};
  const auto x_of = [over_batch](const RunRecord& r) {
    return static_cast<double>(over_batch ? r.config.batch : r.config.seq);
  };
  const Metric y_of = [over_batch, decoder](const RunRecord& r) -> std::optional<double> {
    if (over_batch) return decoder ? r.decode_tokens_per_s_mean : r.sequences_per_s;
    return r.latency ? std::optional<double>(r.latency->p50_ms) : std::nullopt;
  };
  std::set<double> xs;
  for (const auto* r : runs)
    if (y_of(*r)) xs.insert(x_of(*r));
  if (xs.size() < 2) {
    chart.notes.push_back(fmt::format("needs ≥ 2 {}s (these runs have {}: {})", what, xs.empty() ? "none" : "only one",
                                      fmt::join(xs, ", ")));
    return chart;
  }
  Variation v = variation_of(runs);
  (over_batch ? v.batch : v.seq) = false;
  const auto series_of = [&](const RunRecord& r) { return run_label(r, v); };
  const auto series = in_first_appearance_order<std::string>(runs, series_of);
  json datasets = json::array();
  for (std::size_t s = 0; s < series.size(); ++s) {
    std::vector<std::pair<double, double>> points;
    for (const auto* r : runs)
      if (series_of(*r) == series[s] && y_of(*r)) points.emplace_back(x_of(*r), *y_of(*r));
    std::sort(points.begin(), points.end());
    json data = json::array();
    for (const auto& [x, y] : points) data.push_back({{"x", x}, {"y", y}});
    datasets.push_back({{"label", series[s]},
                        {"data", data},
                        {"showLine", true},
                        {"borderColor", color(s)},
                        {"backgroundColor", color(s)},
                        {"pointRadius", 4}});
  }
  chart.config =
      chart_config("scatter", chart.title, {{"datasets", datasets}}, axis(what, over_batch ? "logarithmic" : "linear"),
                   axis(over_batch ? (decoder ? "decode tokens/s" : "sequences/s") : "p50 ms per batch"));
  return chart;
}

ReportChart size_chart(const std::vector<const RunRecord*>& runs) {
  ReportChart chart{"chart-size", "Model size per precision (MiB, as held in memory)", nullptr, {}};
  const auto precisions = precisions_of(runs);
  json values = json::array();
  bool any = false;
  for (const auto& precision : precisions) {
    std::optional<double> mib;
    for (const auto* r : runs)
      if (!mib && r->config.precision == precision && r->model_bytes > 0)
        mib = static_cast<double>(r->model_bytes) / (1024.0 * 1024.0);
    any = any || mib.has_value();
    values.push_back(value_or_null(mib));
  }
  if (!any) {
    chart.notes.push_back("No run recorded its model size.");
    return chart;
  }
  chart.config =
      chart_config("bar", chart.title, {{"labels", precisions}, {"datasets", {bar_dataset("MiB", values, 2)}}},
                   axis("precision", "category"), axis("MiB"));
  return chart;
}

ReportChart trace_chart(const RunTrace& t, std::size_t n) {
  ReportChart chart{fmt::format("chart-trace-{}", n), fmt::format("Power over time: {}", t.run_name), nullptr, {}};
  json datasets = json::array();
  for (std::size_t s = 0; s < t.trace.series.size(); ++s) {
    const auto& series = t.trace.series[s];
    json data = json::array();
    for (std::size_t i = 0; i < series.time_s.size(); ++i)
      data.push_back({{"x", series.time_s[i]}, {"y", series.power_w[i]}});
    datasets.push_back({{"label", series.sensor + (series.derived_from_energy ? " (from energy deltas)" : "")},
                        {"data", data},
                        {"showLine", true},
                        {"pointRadius", 0},
                        {"borderWidth", 1.5},
                        {"borderColor", color(s)},
                        {"backgroundColor", color(s)}});
  }
  chart.notes = t.trace.notes;
  chart.notes.push_back(fmt::format("From {}", t.path.string()));
  if (datasets.empty()) return chart;
  chart.config = chart_config("scatter", chart.title, {{"datasets", datasets}}, axis("time (s)"), axis("power (W)"));
  return chart;
}

}  // namespace

std::vector<ReportSection> build_report_charts(const std::vector<RunRecord>& records, const RecordPareto& pareto,
                                               const std::vector<RunTrace>& traces,
                                               const std::string& missing_traces_note) {
  const auto runs = successful(records);
  std::vector<ReportSection> sections;
  if (runs.empty()) return sections;
  const bool by_accuracy =
      std::any_of(runs.begin(), runs.end(), [](const RunRecord* r) { return r->accuracy.has_value(); });
  if (is_decoder_sweep(records)) {
    sections.push_back({"speed", "Speed per phase", decoder_speed_charts(runs)});
  } else {
    sections.push_back({"speed", "Latency and throughput", {latency_chart(runs), throughput_chart(runs)}});
  }
  sections.push_back({"energy", "Energy", {energy_chart(runs)}});
  const bool by_text = std::any_of(runs.begin(), runs.end(), [](const RunRecord* r) { return r->lm_ppl.has_value(); });
  if (is_decoder_sweep(records) && has_task_scores(runs)) {
    auto charts = by_text ? text_quality_charts(runs) : std::vector<ReportChart>{};
    charts.insert(charts.begin(), task_delta_chart(runs));
    sections.push_back({"accuracy", by_text ? "Quality: task accuracy and the text" : "Task accuracy", charts});
  } else if (by_text && is_decoder_sweep(records)) {
    sections.push_back({"accuracy", "Quality on the text", text_quality_charts(runs)});
  } else {
    sections.push_back({"accuracy", "Accuracy", {accuracy_chart(runs, by_accuracy)}});
  }
  if (is_decoder_sweep(records)) {
    ReportSection tradeoff{"pareto", "Trade-off: quality against decode speed and energy", {}};
    for (const auto& p : decoder_paretos(records)) tradeoff.charts.push_back(decoder_pareto_chart(records, p));
    sections.push_back(std::move(tradeoff));
  } else {
    sections.push_back({"pareto", "Trade-off", {pareto_chart(records, pareto)}});
  }
  const bool decoder = is_decoder_sweep(records);
  sections.push_back({"scaling", "Scaling", {scaling_chart(runs, true, decoder), scaling_chart(runs, false, decoder)}});
  sections.push_back({"size", "Model size", {size_chart(runs)}});
  sections.push_back({"roofline", "Against the machine's limits", {roofline_chart(records)}});
  ReportSection power{"traces", "Power traces", {}};
  for (std::size_t n = 0; n < traces.size(); ++n) power.charts.push_back(trace_chart(traces[n], n));
  if (traces.empty()) power.charts.push_back({"chart-traces-none", "Power over time", nullptr, {missing_traces_note}});
  sections.push_back(std::move(power));
  return sections;
}

std::size_t count_drawn_charts(const std::vector<ReportSection>& sections) {
  std::size_t n = 0;
  for (const auto& section : sections)
    for (const auto& chart : section.charts) n += chart.config.is_null() ? 0 : 1;
  return n;
}

}  // namespace qjoule::report

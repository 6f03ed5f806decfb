#include "report/quality_delta_charts.h"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "qjoule/bench/task_table.h"
#include "report/chart_builders.h"

namespace qjoule::report {
namespace {

using namespace chart_builders;  // NOLINT: the chart helpers report_charts.cpp uses too

// A bar chart of differences: zero is the FP32 baseline, the y axis not stacked (each bar's whisker shares
// its slot, chart_builders' with_error_bars).
ReportChart delta_chart(std::string id, std::string title, json data, const std::string& y_title, std::string none) {
  ReportChart chart{std::move(id), std::move(title), nullptr, {}};
  if (!has_values(data)) {
    chart.notes.push_back(std::move(none));
    return chart;
  }
  json y = axis(y_title);
  y["stacked"] = false;
  chart.config = chart_config("bar", chart.title, std::move(data), axis("precision", "category"), std::move(y));
  return chart;
}

}  // namespace

bool has_task_scores(const std::vector<const bench::RunRecord*>& runs) {
  for (const auto* r : runs)
    if (r->tasks.is_object() && !r->tasks.empty()) return true;
  return false;
}

ReportChart task_delta_chart(const std::vector<const bench::RunRecord*>& runs) {
  std::vector<ValueWithError> series;
  for (const auto& name : bench::task_names(runs)) {
    const auto points = [name](const char* key) {
      return [name, key](const bench::RunRecord& r) -> std::optional<double> {
        const auto v = bench::task_figure(r, name, key);
        return v ? std::optional<double>(*v * 100.0) : std::nullopt;
      };
    };
    series.push_back({name + " Δacc", points("delta_acc"), points("delta_acc_stderr")});
  }
  return delta_chart("chart-tasks",
                     "Task accuracy against FP32 per precision (Δacc, points; whiskers: ± paired standard error; acc "
                     "itself in the task table)",
                     per_precision_data_with_errors(runs, series), "Δacc (points)",
                     "No run has a Δacc (no FP32 answers to compare with).");
}

std::vector<ReportChart> text_quality_charts(const std::vector<const bench::RunRecord*>& runs) {
  std::string text;
  for (const auto* r : runs)
    if (r->lm_ppl && text.empty()) text = r->lm_text;
  auto ppl = delta_chart(
      "chart-delta-ppl",
      fmt::format("Perplexity against FP32 per precision on {} (ΔPPL; whiskers: ± paired standard error)", text),
      per_precision_data_with_errors(runs, {{"ΔPPL", [](const bench::RunRecord& r) { return r.lm_delta_ppl; },
                                             [](const bench::RunRecord& r) { return r.lm_delta_ppl_stderr; }}}),
      "ΔPPL", "No run has a ΔPPL (no FP32 reference on the text).");
  auto kl = delta_chart(
      "chart-kl", "Mean KL divergence from FP32 per token (nats), on the same text (whiskers: ± standard error)",
      per_precision_data_with_errors(runs, {{"mean KL", [](const bench::RunRecord& r) { return r.lm_kl_mean; },
                                             [](const bench::RunRecord& r) { return r.lm_kl_stderr; }}}),
      "mean KL (nats)", "No run has a KL from FP32.");
  return {std::move(ppl), std::move(kl)};
}

}  // namespace qjoule::report

#include "report/task_accuracy_chart.h"

#include <string>
#include <utility>

#include "qjoule/bench/task_table.h"
#include "report/chart_builders.h"

namespace qjoule::report {

using namespace chart_builders;  // NOLINT: the chart helpers report_charts.cpp uses too

bool has_task_scores(const std::vector<const bench::RunRecord*>& runs) {
  for (const auto* r : runs)
    if (r->tasks.is_object() && !r->tasks.empty()) return true;
  return false;
}

ReportChart task_accuracy_chart(const std::vector<const bench::RunRecord*>& runs) {
  ReportChart chart{"chart-tasks",
                    "Task accuracy per precision (%): acc, the right choice's log-likelihood highest (± standard error "
                    "and Δ against FP32 in summary.md)",
                    nullptr,
                    {}};
  std::vector<std::pair<std::string, Metric>> metrics;
  for (const auto& name : bench::task_names(runs))
    metrics.emplace_back(name, [name](const bench::RunRecord& r) -> std::optional<double> {
      const auto acc = bench::task_figure(r, name, "acc");
      return acc ? std::optional<double>(*acc * 100.0) : std::nullopt;
    });
  json data = per_precision_data(runs, metrics);
  if (!has_values(data)) {
    chart.notes.push_back("No run has a task accuracy.");
    return chart;
  }
  chart.config = chart_config("bar", chart.title, std::move(data), axis("precision", "category"), axis("acc (%)"));
  return chart;
}

}  // namespace qjoule::report

// The report's quality charts of a decoder sweep, drawn as differences from FP32 so that they show (a
// perplexity of 45.68 beside 46.13, or an accuracy of 44.6% beside 44.2%, is two equal bars from zero):
// ΔPPL and mean KL on the text (`bench --text`), Δacc per task (`bench --task`), each bar with a whisker
// of ± its paired standard error (lm_delta_ppl_stderr, lm_kl_stderr, the task's delta_acc_stderr) where
// the record has one. Peers' runs (scripts/peers/) stand beside qjoule's, one category per precision.
#pragma once

#include <vector>

#include "qjoule/bench/run_record.h"
#include "qjoule/report/report_charts.h"

namespace qjoule::report {

// Whether any run has task scores.
bool has_task_scores(const std::vector<const bench::RunRecord*>& runs);
// chart-tasks: Δacc against FP32 per precision, in points, one series per task.
ReportChart task_delta_chart(const std::vector<const bench::RunRecord*>& runs);
// chart-delta-ppl and chart-kl.
std::vector<ReportChart> text_quality_charts(const std::vector<const bench::RunRecord*>& runs);

}  // namespace qjoule::report

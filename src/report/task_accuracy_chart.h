// The report's chart of a decoder sweep's multiple-choice task accuracy (`bench --task`): per precision,
// each task's acc in percent, one bar per task (and shape where shapes vary), drawn beside the perplexity
// charts of `bench --text` in the quality section.
#pragma once

#include <vector>

#include "qjoule/bench/run_record.h"
#include "qjoule/report/report_charts.h"

namespace qjoule::report {

// Whether any run has task scores.
bool has_task_scores(const std::vector<const bench::RunRecord*>& runs);
ReportChart task_accuracy_chart(const std::vector<const bench::RunRecord*>& runs);

}  // namespace qjoule::report

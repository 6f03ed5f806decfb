// The task accuracy of a sweep's decoder runs (`bench --task`), as summary.md and the console print it
// below the paper table: per run, each task's acc ± its standard error, Δacc against FP32's answers on
// the same items and the share of items whose answer changed; then the runs whose Δacc is below
// −max_accuracy_drop_pt points, flagged as the paper table flags accuracy drops.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// Every task name the records hold (`bench --task`: the task files' stems), sorted; the task table's and
// results.csv's columns and the report's task chart.
std::vector<std::string> task_names(const std::vector<RunRecord>& records);
std::vector<std::string> task_names(const std::vector<const RunRecord*>& records);

// The number `key` ("acc", "delta_acc", ...) of `task` in the record's tasks, or nullopt where the record has
// no such task or figure (null, or not a number).
std::optional<double> task_figure(const RunRecord& record, const std::string& task, std::string_view key);

struct TaskTable {
  std::vector<PaperTableColumn> columns;  // run, precision, then per task: acc, Δacc, changed
  std::vector<PaperTableRow> rows;        // one per successful run with tasks (cells not escaped)
  std::vector<std::string> drops;         // the runs below −max_accuracy_drop_pt, one line each
};

// No columns when no record has tasks.
TaskTable build_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt);
// The table in markdown with its heading and flagged drops; "" when no record has tasks.
std::string format_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt);

}  // namespace qjoule::bench

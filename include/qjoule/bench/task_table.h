// The task accuracy of a sweep's decoder runs (`bench --task`), as summary.md and the console print it
// below the paper table: per run, each task's acc ± its standard error, Δacc against FP32's answers on
// the same items and the share of items whose answer changed; then the runs whose Δacc is below
// −max_accuracy_drop_pt points, flagged as the paper table flags accuracy drops.
#pragma once

#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// "" when no record has tasks.
std::string format_task_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt);

}  // namespace qjoule::bench

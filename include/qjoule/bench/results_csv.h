// results.csv: the scalar columns of the flat run records, for spreadsheets and pandas.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// The CSV columns: kRunRecordKeys without the objects `environment`, `energy_window`,
// `decode_energy_window` and `tasks`. The lists `kernel_paths` and `notes` become one cell each, their
// items joined with "; ".
std::vector<std::string_view> results_csv_columns();

// The figures of each `bench --task` task that follow those columns, as "task.<name>.<figure>", one
// column per task the records hold (by name) and figure; a run without the task
// or the figure (a failed run, no FP32 reference) has empty cells. qjoule.to_pandas names the same columns.
inline constexpr std::string_view kResultsCsvTaskFigures[] = {
    "items",    "acc",       "acc_stderr",       "acc_norm",       "acc_norm_stderr",
    "fp32_acc", "delta_acc", "delta_acc_stderr", "delta_acc_norm", "changed_share"};

// The header line (results_csv_columns(), then the task columns) and one line per record (RFC 4180
// quoting; null is an empty cell).
std::string format_results_csv(const std::vector<RunRecord>& records);

// Writes format_results_csv atomically (a temporary file, then rename).
void write_results_csv(const std::vector<RunRecord>& records, const std::filesystem::path& path);

}  // namespace qjoule::bench

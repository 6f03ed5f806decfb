// results.csv: the scalar columns of the flat run records, for spreadsheets and pandas.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// The CSV columns: kRunRecordKeys without the objects `environment`, `energy_window` and
// `decode_energy_window`. The lists `kernel_paths` and `notes` become one cell each, their items
// joined with "; ".
std::vector<std::string_view> results_csv_columns();

// The header line and one line per record (RFC 4180 quoting; null is an empty cell).
std::string format_results_csv(const std::vector<RunRecord>& records);

// Writes format_results_csv atomically (a temporary file, then rename).
void write_results_csv(const std::vector<RunRecord>& records, const std::filesystem::path& path);

}  // namespace qjoule::bench

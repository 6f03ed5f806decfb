// The roof figures of the summary tables (paper_table.cpp): the % roof cells, the warnings for a phase far
// below its roof, and the legend lines. Internal to qjoule_bench.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

inline constexpr const char* kMissing = "—";  // a cell with nothing measured

// "47%" of the roof, or "—".
std::string roof_cell(const std::optional<double>& fraction);

// The decode's fraction over the memory read beside the run, where that read was more than
// limits::kReadBesideTolerance (host_capacity.h) off the limits' read; else nullopt.
std::optional<double> decode_beside_apart(const RunRecord& r);

// "45%", or "45% (81%)" with the fraction beside the run where decode_beside_apart has one.
std::string decode_roof_cell(const RunRecord& r);

// Adds a line to table.roof_warnings where `fraction` is below limits::kRoofWarningFraction.
void warn_below_roof(PaperTable& table, const RunRecord& r, const char* phase, const std::optional<double>& fraction,
                     const std::string& bound);

bool any_roof(const std::vector<RunRecord>& records);

extern const char* const kRoofLegend;
extern const char* const kDecodeBesideLegend;

}  // namespace qjoule::bench

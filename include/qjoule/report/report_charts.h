// The report's charts as Chart.js configurations (plain JSON: the page only hands each one to
// `new Chart`), grouped in sections. A chart with nothing honest to draw has no configuration and
// says why instead (energy unavailable, a single batch size, no power traces), never 0-valued bars.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/run_record.h"
#include "qjoule/report/power_trace.h"
#include "qjoule/report/record_pareto.h"

namespace qjoule::report {

struct RunTrace {
  std::string run_name;
  std::filesystem::path path;
  PowerTrace trace;
};

struct ReportChart {
  std::string id;  // the canvas id, "chart-latency"
  std::string title;
  nlohmann::json config;           // the Chart.js configuration; null when nothing is drawn
  std::vector<std::string> notes;  // shown under the chart, or instead of it
};

struct ReportSection {
  std::string id, title;
  std::vector<ReportChart> charts;
};

// Sections: latency and throughput, energy, accuracy, trade-off (the Pareto scatter), scaling
// (batch, sequence length), model size, power traces. `missing_traces_note` is the note shown
// when `traces` is empty.
std::vector<ReportSection> build_report_charts(const std::vector<bench::RunRecord>& records, const RecordPareto& pareto,
                                               const std::vector<RunTrace>& traces,
                                               const std::string& missing_traces_note);

// How many charts have a configuration (the canvases the page must draw).
std::size_t count_drawn_charts(const std::vector<ReportSection>& sections);

}  // namespace qjoule::report

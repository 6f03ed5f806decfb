// The fixed parts of the report page: its style sheet and its two small scripts (Chart.js itself
// is inlined from Debian's file, see qjoule/report/chartjs_source.h).
#pragma once

#include <string_view>

namespace qjoule::report::detail {

// Counts window errors, console.error calls and Content-Security-Policy violations into
// #qjoule-report-status. The first script of the page, so it sees everything after it.
extern const std::string_view kErrorCaptureScript;

// Draws every <canvas data-chart="ID"> from the JSON in #qjoule-report-data, makes table.sortable
// sortable by clicking a header, and fills #qjoule-report-status (charts expected and drawn, done).
extern const std::string_view kPageScript;

extern const std::string_view kPageStyle;

}  // namespace qjoule::report::detail

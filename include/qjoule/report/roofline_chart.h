// The roofline chart: every run's measured phase as a point (arithmetic intensity, FLOP per byte read,
// against achieved GFLOP/s, both axes logarithmic), a decoder run's decode steps as a second point, and
// the machine's roofs from the records' environment.machine_limits: the memory roof (read bandwidth ×
// intensity) and a flat roof per compute type measured. Runs without roof figures (a GPU run, an older
// record) are named in a note; with none, the chart says why instead of drawing.
#pragma once

#include <vector>

#include "qjoule/bench/run_record.h"
#include "qjoule/report/report_charts.h"

namespace qjoule::report {

ReportChart roofline_chart(const std::vector<bench::RunRecord>& records);

}  // namespace qjoule::report

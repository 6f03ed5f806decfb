// A decoder sweep's speed charts, in the units a decoder is measured in (not an encoder's ms per batch
// and sequences/s): latency per phase (prefill p50 ms per batch of prompts, decode mean ms per token)
// and throughput per phase (prompt tokens/s, generated tokens/s), per precision.
#pragma once

#include <vector>

#include "qjoule/bench/run_record.h"
#include "qjoule/report/report_charts.h"

namespace qjoule::report {

// chart-phase-latency, chart-prefill-throughput, chart-decode-throughput; a chart no run has a value
// for says so instead of drawing.
std::vector<ReportChart> decoder_speed_charts(const std::vector<const bench::RunRecord*>& runs);

}  // namespace qjoule::report

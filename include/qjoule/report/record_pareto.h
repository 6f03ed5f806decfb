// Which benchmark runs are the best trade-offs: the Pareto frontier of energy per inference (or,
// when no run has energy, p50 latency) against accuracy (or, without labels, top-1 agreement with
// FP32), over the runs that can be compared honestly.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::report {

struct RecordPareto {
  bool cost_is_energy = true;             // J/inference; false: p50 latency, ms (no run has energy)
  bool quality_is_accuracy = true;        // accuracy; false: top-1 agreement with FP32 (no run has labels)
  std::string cost_label, quality_label;  // axis titles with units
  // The candidates: successful runs with both values that are not emulated (their energy and speed
  // are not representative). FP32 runs without a recorded agreement count as agreeing fully.
  std::vector<std::size_t> candidates;  // indices into the records
  std::vector<double> cost, quality;    // parallel to candidates; quality in percent
  std::vector<std::size_t> frontier;    // indices into the records, cheapest first
  std::vector<std::string> left_out;    // "<run>: why it is not a candidate", for runs that are not
};

RecordPareto pareto_of_records(const std::vector<bench::RunRecord>& records);

// A decoder sweep's trade-offs (every successful run a decoder run): quality — perplexity on the text
// (lm_ppl, lower is better), or without a text the top-1 agreement with FP32 on pseudo-random prompts
// (higher is better) — against decode tok/s (higher is better) and, where any run has decode energy,
// against decode mJ/token (lower is better). Emulated and failed runs are left out with the reason.
struct DecoderPareto {
  std::string id, title, x_label, y_label;
  bool x_higher_is_better = true, y_lower_is_better = true;
  std::vector<std::size_t> candidates;  // indices into the records
  std::vector<double> x, y;             // parallel to candidates
  std::vector<std::size_t> frontier;    // indices into the records, best x first
  std::vector<std::string> left_out;    // "<run>: why"
  std::string unavailable;              // why the chart has nothing to draw (no decode energy at all)
};

// True when the records have a successful run and every successful run is a decoder run.
bool is_decoder_sweep(const std::vector<bench::RunRecord>& records);

// [quality vs decode tok/s, quality vs decode mJ/token].
std::vector<DecoderPareto> decoder_paretos(const std::vector<bench::RunRecord>& records);

}  // namespace qjoule::report

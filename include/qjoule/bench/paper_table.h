// The human view of a benchmark: a markdown table (aligned, so it also reads in a terminal) with
// each run's latency, throughput, energy, accuracy and size, and its deltas against the FP32
// baseline of the same model and shape; then what needs attention (accuracy drops, failures).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

// Columns: run, precision, batch, seq, threads, p50 ms, seq/s, J/inference ("unavailable" when not
// measured; "(est.)" when estimated), accuracy (or the top-1 agreement with FP32 when there are no
// labels, marked "agr."), size MiB, and against the FP32 run with the same model, device, batch,
// seq and threads: speed-up (baseline p50 / p50, "2.50x"), energy change ("-60.0%"), accuracy change
// in points, size ratio (fp32_bytes / model_bytes). The baseline row reads "baseline". Rows whose
// accuracy (or agreement) drop exceeds max_accuracy_drop_pt are marked "!" and listed below the table
// with what to try next; emulated (not representative) rows are marked "*"; failed runs are listed
// below the table with their error, not in it. When a successful run is a decoder run, a last
// column "decode tok/s" (decode_tokens_per_s_mean) is added and a legend line says that the other
// speed and energy columns of decoder runs are per prefill.
//
// When every successful run is a decoder run, the table is a decoder's instead: run, precision,
// prefill tok/s, decode tok/s, decode mJ/token (n/a [k] with a footnote when unavailable), PPL ± its
// standard error, ΔPPL against the FP32 reference (in %, "!" above max_ppl_increase_pct, and listed
// below with what to try), mean KL, same-top-token rate, size MiB, peak MiB, and the decode speed-up
// against the FP32 run of the same model, device, seq and threads. Runs without a text (no lm_ppl)
// show "—" there and their top-1 agreement on pseudo-random prompts ("agr.", flagged against
// max_accuracy_drop_pt as in the encoder table).
inline constexpr double kDefaultMaxPplIncreasePct = 5.0;
std::string format_paper_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt,
                               double max_ppl_increase_pct = kDefaultMaxPplIncreasePct);

// The same table as data, for other renderings (the HTML report): cells as plain text (not
// markdown-escaped), one row per successful run, and the lines format_paper_table prints below it.
struct PaperTableColumn {
  std::string header;
  bool right_aligned;  // numbers
};
// A markdown table padded to aligned columns, so it reads as well in a terminal as rendered (cells already
// escaped: escape_cell).
std::string render_table(const std::vector<PaperTableColumn>& columns,
                         const std::vector<std::vector<std::string>>& rows);
// `text` with its '|' escaped for a markdown cell.
std::string escape_cell(const std::string& text);

struct PaperTableRow {
  std::size_t record;              // index into the records the table was built from
  std::vector<std::string> cells;  // one per column
};
struct PaperTable {
  std::vector<PaperTableColumn> columns;
  std::vector<PaperTableRow> rows;
  std::vector<std::string> legend;          // what the markers mean, runs without a baseline
  std::vector<std::string> accuracy_drops;  // "<run>: -5.00 pt accuracy — try ...", one per flagged row
  std::string accuracy_drops_heading;       // "Accuracy drop above 1 pt", "Perplexity increase above 5%"
  std::vector<std::string> failed;          // "<run>: <error>"
  // "<run>: 12% of its roof (compute: fp32 364 GFLOP/s) ...": runs below kRoofWarningFraction of the
  // machine's measured limit (roof_fraction or decode_roof_fraction), one per flagged run.
  std::vector<std::string> roof_warnings;
  double max_accuracy_drop_pt = 0;
  bool decoder_layout = false;                // the decoder table (every successful run a decoder run)
  std::size_t energy_column = 0;              // the column whose "n/a [k]" cells have footnotes
  std::vector<std::string> energy_footnotes;  // reason of footnote k + 1
};

// `baseline_precision` is the precision spec the deltas compare against (its token must match; the
// default gives format_paper_table's table). The agreement delta is always against FP32, which is
// what the records' top-1 agreement measures.
PaperTable build_paper_table(const std::vector<RunRecord>& records, double max_accuracy_drop_pt,
                             const std::string& baseline_precision = "fp32",
                             double max_ppl_increase_pct = kDefaultMaxPplIncreasePct);

// "# qjoule bench", the table, each record's notes and the environment; written atomically.
void write_summary_md(const std::vector<RunRecord>& records, const std::filesystem::path& path,
                      double max_accuracy_drop_pt, double max_ppl_increase_pct = kDefaultMaxPplIncreasePct);

}  // namespace qjoule::bench

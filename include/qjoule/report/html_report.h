// `qjoule report`: one self-contained HTML page from benchmark run records — the header (models,
// devices, environment, validity warnings, skipped lines), the paper table (sortable) and the
// charts (Chart.js, inlined). A Content-Security-Policy lets the page run only its own inline
// scripts and styles, so it opens offline and fetches nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"
#include "qjoule/bench/sweep_loop.h"
#include "qjoule/report/tolerant_reader.h"

namespace qjoule::report {

struct ReportOptions {
  std::string baseline = "fp32";      // the precision spec the table's deltas compare against
  double max_accuracy_drop_pt = 1.0;  // flag runs whose accuracy drops more (as `qjoule bench`)
  double max_ppl_increase_pct = 5.0;  // flag decoder runs whose perplexity rises more (as `qjoule bench`)
  // Folders holding results.jsonl: a run's power trace is read from <folder>/traces/<run_name>.csv,
  // the first found. Empty: write_html_report looks in the folder of its `out` (where `qjoule bench`
  // writes both); render_html_report looks nowhere.
  std::vector<std::filesystem::path> results_dirs;
  std::vector<std::filesystem::path> inputs;  // the files the records came from, named in the header
  std::vector<SkippedLine> skipped;           // lines the reader left out, named in the "Skipped" box
  std::filesystem::path chartjs;              // empty: chartjs_path() ($QJOULE_CHARTJS or Debian's)
};

// The page. No records, a baseline that is not a precision, or Chart.js missing fails.
std::string render_html_report(const std::vector<bench::RunRecord>& records, const ReportOptions& options);

// Renders and writes the page atomically (a temporary file beside `out`, then rename): a failure
// leaves no half-written page. `qjoule bench` calls this for OUT/report.html. Fails with one line
// ("cannot write 'PATH': <reason>") when `out` cannot be written.
void write_html_report(const std::vector<bench::RunRecord>& records, const std::filesystem::path& out,
                       const ReportOptions& options);

// write_html_report as a sweep's report.html writer (bench::SweepSettings::html_report,
// bench::write_sweep_outputs): the baseline fp32 and the sweep's flag thresholds.
bench::HtmlReportWriter sweep_html_writer();

}  // namespace qjoule::report

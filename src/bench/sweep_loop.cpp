#include "qjoule/bench/sweep_loop.h"

#include <chrono>

#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/results_csv.h"
#include "qjoule/error.h"

namespace qjoule::bench {

std::vector<RunConfig> configs_to_run(const std::vector<RunConfig>& configs, const ResultsStore& store) {
  std::vector<RunConfig> out;
  for (const auto& c : configs) {
    if (!store.has(run_name(c))) out.push_back(c);
  }
  return out;
}

SweepOutcome run_sweep(const std::vector<RunConfig>& configs, ResultsStore& store,
                       const std::function<RunRecord(const RunConfig&)>& run, SweepReporter& reporter) {
  SweepOutcome outcome;
  outcome.total = configs.size();
  const std::size_t to_run = configs_to_run(configs, store).size();
  outcome.skipped = outcome.total - to_run;
  reporter.sweep_started(outcome.total, outcome.skipped);
  const auto started = std::chrono::steady_clock::now();
  std::size_t index = 0;
  for (const auto& c : configs) {
    ++index;
    const std::string name = run_name(c);
    if (store.has(name)) continue;
    reporter.run_started(index, outcome.total, name);
    const RunRecord record = run(c);
    try {
      store.append(record);
    } catch (const Error&) {
      reporter.run_aborted();
      throw;
    }
    ++outcome.ran;
    if (record.status != "ok") ++outcome.failed;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    reporter.run_finished(record, outcome.ran, to_run, elapsed / double(outcome.ran) * double(to_run - outcome.ran));
  }
  return outcome;
}

SweepOutputs write_sweep_outputs(const std::vector<RunRecord>& records, const std::filesystem::path& out,
                                 const HtmlReportWriter& html, double max_accuracy_drop, double max_ppl_increase_pct) {
  SweepOutputs outputs;
  write_results_csv(records, out / "results.csv");
  outputs.written.push_back(out / "results.csv");
  write_summary_md(records, out / "summary.md", max_accuracy_drop, max_ppl_increase_pct);
  outputs.written.push_back(out / "summary.md");
  if (html) {
    try {
      html(records, out / "report.html", max_accuracy_drop, max_ppl_increase_pct);
      outputs.written.push_back(out / "report.html");
    } catch (const Error& e) {
      outputs.report_error = e.what();
    }
  }
  outputs.paper_table = format_paper_table(records, max_accuracy_drop, max_ppl_increase_pct);
  return outputs;
}

}  // namespace qjoule::bench

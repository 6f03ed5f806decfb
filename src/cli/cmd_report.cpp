// `qjoule report`: one self-contained HTML page from `qjoule bench` records.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "qjoule/quant/format.h"
#include "qjoule/report/html_report.h"
#include "qjoule/report/tolerant_reader.h"

namespace qjoule::cli {
namespace {

namespace fs = std::filesystem;

struct ReportArgs {
  std::vector<std::string> files;
  std::string out;
  std::string baseline{quant::name(quant::Format::fp32)};
  double max_accuracy_drop = 1.0;
  double max_ppl_increase = 5.0;
};

// The folder of a results file (a folder given stands for its results.jsonl): traces/ lies beside it.
fs::path results_dir_of(const fs::path& given) {
  std::error_code ec;
  if (fs::is_directory(given, ec)) return given;
  return given.has_parent_path() ? given.parent_path() : fs::path(".");
}

void run_report(const ReportArgs& a) {
  std::vector<fs::path> files(a.files.begin(), a.files.end());
  const report::ReadResults results = report::read_results_tolerantly(files);
  for (const auto& s : results.skipped)
    fmt::print(stderr, "qjoule: warning: skipped {}:{}: {}\n", s.file.string(), s.line, s.reason);

  report::ReportOptions options;
  options.baseline = a.baseline;
  options.max_accuracy_drop_pt = a.max_accuracy_drop;
  options.max_ppl_increase_pct = a.max_ppl_increase;
  options.skipped = results.skipped;
  for (const auto& f : files) {
    const fs::path dir = results_dir_of(f);
    if (std::find(options.results_dirs.begin(), options.results_dirs.end(), dir) == options.results_dirs.end())
      options.results_dirs.push_back(dir);
  }
  for (const auto& source : results.sources)
    if (std::find(options.inputs.begin(), options.inputs.end(), source) == options.inputs.end())
      options.inputs.push_back(source);

  const fs::path out = a.out.empty() ? results_dir_of(files.front()) / "report.html" : fs::path(a.out);
  report::write_html_report(results.records, out, options);
  fmt::print(stderr, "wrote {} ({} runs{})\n", out.string(), results.records.size(),
             results.skipped.empty() ? "" : fmt::format(", {} line(s) skipped", results.skipped.size()));
}

}  // namespace

void add_report_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML page (table, charts, validity warnings) from `qjoule bench` results.");
  cmd->footer(
      "The page opens offline and fetches nothing: Chart.js is inlined from Debian's libjs-chart.js\n"
      "(/usr/share/javascript/chart.js/chart.min.js, or $QJOULE_CHARTJS). Lines that do not read (a torn last\n"
      "line, a newer schema_version) are skipped and named on the page. Power traces are read from\n"
      "<results folder>/traces/<run_name>.csv (`qjoule energy --trace` format).\n"
      "Examples:\n"
      "  qjoule report qjoule-bench/2026-11-23T19-45-02Z/results.jsonl -o report.html\n"
      "  qjoule report a/results.jsonl b/results.jsonl -o both.html --baseline bf16");
  auto a = std::make_shared<ReportArgs>();
  cmd->add_option("files", a->files, "results.jsonl files (or folders holding one)")->required();
  cmd->add_option("-o,--out", a->out, "The HTML file to write (default: report.html beside the first results file)");
  cmd->add_option("--baseline", a->baseline, "Precision the table's deltas compare against")->capture_default_str();
  cmd->add_option("--max-accuracy-drop", a->max_accuracy_drop,
                  "Flag runs whose accuracy (or agreement) drops more than this many points below the baseline")
      ->capture_default_str()
      ->check(in_range(0, 100));
  cmd->add_option("--max-ppl-increase", a->max_ppl_increase,
                  "Flag decoder runs whose perplexity on the text is more than this many percent above FP32's")
      ->capture_default_str()
      ->check(in_range(0, 1e6));
  cmd->callback([a] { run_report(*a); });
}

}  // namespace qjoule::cli

#include "qjoule/report/html_report.h"
#include "qjoule/limits/roofline.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <set>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "io/atomic_file.h"
#include "qjoule/bench/paper_table.h"
#include "qjoule/bench/task_table.h"
#include "qjoule/build_info.h"
#include "qjoule/error.h"
#include "qjoule/report/chartjs_source.h"
#include "qjoule/report/html_text.h"
#include "qjoule/report/record_pareto.h"
#include "qjoule/report/report_charts.h"
#include "qjoule/report/validity_warnings.h"
#include "report/page_assets.h"

namespace qjoule::report {
namespace {

using bench::RunRecord;

constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

// The environment keys shown first, in this order; any others follow in a <details>.
constexpr std::array<const char*, 6> kMainEnvironmentKeys = {"cpu",          "isa", "os", "compiler", "qjoule_version",
                                                             "qjoule_commit"};

std::string environment_value_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_string(); })) {
    std::vector<std::string> items;
    for (const auto& v : value) items.push_back(v.get<std::string>());
    return fmt::format("{}", fmt::join(items, " "));
  }
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Every distinct value of a key across the records, in order of first appearance.
template <typename Get>
std::vector<std::string> distinct(const std::vector<RunRecord>& records, Get get) {
  std::vector<std::string> values;
  for (const auto& r : records) {
    std::string value = get(r);
    if (!value.empty() && std::find(values.begin(), values.end(), value) == values.end())
      values.push_back(std::move(value));
  }
  return values;
}

std::string joined_escaped(const std::vector<std::string>& values, const char* separator = ", ") {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : separator) + html_escape(v);
  return out.empty() ? "—" : out;
}

void append_fact(std::string& html, const std::string& name, const std::string& escaped_value) {
  html += fmt::format("<dt>{}</dt><dd>{}</dd>\n", html_escape(name), escaped_value);
}

std::string header_html(const std::vector<RunRecord>& records, const ReportOptions& options) {
  const auto models = distinct(records, [](const RunRecord& r) { return r.config.model; });
  const auto devices = distinct(records, [](const RunRecord& r) { return r.config.device; });
  std::string html =
      fmt::format("<header>\n<h1>qjoule report: {}</h1>\n<dl class=\"facts\" id=\"facts\">\n", joined_escaped(models));
  append_fact(html, models.size() == 1 ? "model" : "models", joined_escaped(models));
  append_fact(html, devices.size() == 1 ? "device" : "devices", joined_escaped(devices));
  std::set<std::string> shown;
  for (const char* key : kMainEnvironmentKeys) {
    const auto values = distinct(records, [&](const RunRecord& r) {
      const auto found = r.environment.find(key);
      return found == r.environment.end() || found->is_null() ? std::string() : environment_value_text(*found);
    });
    append_fact(html, key, joined_escaped(values, " | "));
    shown.insert(key);
  }
  std::vector<std::string> starts;
  for (const auto& r : records)
    if (!r.start_time.empty()) starts.push_back(r.start_time);
  std::sort(starts.begin(), starts.end());
  append_fact(html, "runs",
              starts.empty() ? fmt::format("{}", records.size())
                             : fmt::format("{}, started {} to {}", records.size(), html_escape(starts.front()),
                                           html_escape(starts.back())));
  append_fact(html, "report generated",
              fmt::format("{} by qjoule {} (commit {})", bench::iso8601_utc(std::chrono::system_clock::now()),
                          html_escape(build_info::kVersion), html_escape(build_info::kGitCommit)));
  if (!options.inputs.empty()) {
    std::vector<std::string> inputs;
    for (const auto& p : options.inputs) inputs.push_back(p.string());
    append_fact(html, "from", joined_escaped(inputs));
  }
  html += "</dl>\n";

  std::string others;
  std::set<std::string> other_keys;
  for (const auto& r : records)
    if (r.environment.is_object())
      for (const auto& item : r.environment.items())
        if (!shown.count(item.key()) && item.key() != "host_capacity")  // each run's own, in its notes when busy
          other_keys.insert(item.key());
  for (const auto& key : other_keys) {
    const auto values = distinct(records, [&](const RunRecord& r) {
      const auto found = r.environment.find(key);
      return found == r.environment.end() || found->is_null() ? std::string() : environment_value_text(*found);
    });
    append_fact(others, key, joined_escaped(values, " | "));
  }
  if (!others.empty())
    html += fmt::format(
        "<details><summary>Environment, every key</summary>\n<dl class=\"facts\">\n{}</dl>\n"
        "</details>\n",
        others);
  html += "</header>\n";
  return html;
}

std::string list_html(const std::vector<std::string>& items) {
  std::string html = "<ul>\n";
  for (const auto& item : items) html += fmt::format("<li>{}</li>\n", html_escape(item));
  return html + "</ul>\n";
}

std::string warnings_html(const std::vector<RunRecord>& records) {
  const auto warnings = validity_warnings(records);
  if (warnings.empty())
    return "<section id=\"validity\" class=\"box ok\"><h2>Validity</h2>\n<p>No warnings: every run succeeded, "
           "with energy measured (not estimated) in unflagged windows, and none is emulated.</p></section>\n";
  std::string html = "<section id=\"validity\" class=\"box warn\"><h2>Validity warnings</h2>\n";
  for (const auto& w : warnings)
    html += fmt::format("<div class=\"warning\" data-kind=\"{}\"><h3>{}</h3>\n{}</div>\n", html_escape(w.kind),
                        html_escape(w.title), list_html(w.items));
  return html + "</section>\n";
}

std::string skipped_html(const std::vector<SkippedLine>& skipped) {
  if (skipped.empty()) return "";
  std::string html = fmt::format(
      "<section id=\"skipped\" class=\"box skipped\"><h2>Skipped ({} line{})</h2>\n"
      "<p>These lines of the results were not read; the report shows the other records.</p>\n<ul>\n",
      skipped.size(), skipped.size() == 1 ? "" : "s");
  for (const auto& s : skipped)
    html +=
        fmt::format("<li><code>{}:{}</code>: {}</li>\n", html_escape(s.file.string()), s.line, html_escape(s.reason));
  return html + "</ul>\n</section>\n";
}

// `bench --task`: each task's acc, Δacc and changed answers per run, and the runs flagged below the drop.
std::string task_table_html(const std::vector<RunRecord>& records, const ReportOptions& options) {
  const bench::TaskTable table = bench::build_task_table(records, options.max_accuracy_drop_pt);
  if (table.columns.empty()) return "";
  std::string html =
      "<h3>Task accuracy</h3>\n<p class=\"note\">acc ± its standard error; Δacc against FP32's answers on the same "
      "items; changed: the share of items whose answer differs from FP32's.</p>\n<div class=\"table-wrap\"><table "
      "id=\"task-table\" class=\"sortable\">\n<thead><tr>";
  for (const auto& column : table.columns) html += fmt::format("<th>{}</th>", html_escape(column.header));
  html += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    html += fmt::format("<tr data-run=\"{}\">", html_escape(records[row.record].run_name));
    for (std::size_t c = 0; c < row.cells.size(); ++c)
      html += fmt::format("<td{}>{}</td>", table.columns[c].right_aligned ? " class=\"num\"" : "",
                          html_escape(row.cells[c]));
    html += "</tr>\n";
  }
  html += "</tbody>\n</table></div>\n";
  if (!table.drops.empty())
    html += fmt::format("<div class=\"box warn\" id=\"task-drops\"><h3>Task accuracy drop above {} pt</h3>\n{}</div>\n",
                        options.max_accuracy_drop_pt, list_html(table.drops));
  return html;
}

std::string table_html(const std::vector<RunRecord>& records, const ReportOptions& options) {
  const bench::PaperTable table =
      bench::build_paper_table(records, options.max_accuracy_drop_pt, options.baseline, options.max_ppl_increase_pct);
  std::string html = fmt::format(
      "<section id=\"results\"><h2>Results</h2>\n<p class=\"note\">Deltas against the "
      "{} run with the same model, device, batch, seq and threads. Click a column "
      "header to sort.</p>\n",
      html_escape(options.baseline));
  if (table.rows.empty()) {
    html += "<p>No successful runs.</p>\n";
  } else {
    html += "<div class=\"table-wrap\"><table id=\"paper-table\" class=\"sortable\">\n<thead><tr>";
    for (const auto& column : table.columns) html += fmt::format("<th>{}</th>", html_escape(column.header));
    html += "</tr></thead>\n<tbody>\n";
    for (const auto& row : table.rows) {
      const RunRecord& r = records[row.record];
      html += fmt::format("<tr data-run=\"{}\"{}>", html_escape(r.run_name),
                          r.not_representative ? " class=\"emulated\"" : "");
      for (std::size_t c = 0; c < row.cells.size(); ++c) {
        // Energy that was not measured: its footnote mark in the cell (the reason in the legend below,
        // and on hover), as summary.md has it.
        const std::string& cell = row.cells[c];
        if (c == table.energy_column && cell.rfind("n/a [", 0) == 0) {
          const std::size_t k = std::stoul(cell.substr(5)) - 1;
          const std::string reason = k < table.energy_footnotes.size() ? table.energy_footnotes[k] : cell;
          html +=
              fmt::format("<td class=\"num unavailable\" title=\"{}\">{}</td>", html_escape(reason), html_escape(cell));
          continue;
        }
        html += fmt::format("<td{}>{}</td>", table.columns[c].right_aligned ? " class=\"num\"" : "",
                            html_escape(row.cells[c]));
      }
      html += "</tr>\n";
    }
    html += "</tbody>\n</table></div>\n";
  }
  if (!table.legend.empty())
    html += fmt::format("<div class=\"note\" id=\"table-legend\">{}</div>\n", list_html(table.legend));
  if (!table.accuracy_drops.empty())
    html += fmt::format("<div class=\"box warn\" id=\"accuracy-drops\"><h3>{}</h3>\n{}</div>\n",
                        html_escape(table.accuracy_drops_heading), list_html(table.accuracy_drops));
  if (!table.roof_warnings.empty())
    html += fmt::format(
        "<div class=\"box warn\" id=\"roof-warnings\"><h3>Below {:.0f}% of the machine's limit</h3>\n{}</div>\n",
        limits::kRoofWarningFraction * 100, list_html(table.roof_warnings));
  if (!table.failed.empty())
    html += fmt::format("<div id=\"failed-runs\"><h3>Failed runs</h3>\n{}</div>\n", list_html(table.failed));
  return html + task_table_html(records, options) + "</section>\n";
}

std::string pareto_list_html(const std::vector<RunRecord>& records, const RecordPareto& pareto) {
  std::string html = fmt::format("<h3>Pareto frontier ({} vs {})</h3>\n<ol id=\"pareto-list\">\n",
                                 html_escape(pareto.cost_label), html_escape(pareto.quality_label));
  for (const std::size_t index : pareto.frontier) {
    const auto k = static_cast<std::size_t>(std::find(pareto.candidates.begin(), pareto.candidates.end(), index) -
                                            pareto.candidates.begin());
    html += fmt::format("<li data-run=\"{0}\"><code>{0}</code> — {1:.4g} {2}, {3:.2f}%</li>\n",
                        html_escape(records[index].run_name), pareto.cost[k], pareto.cost_is_energy ? "J" : "ms",
                        pareto.quality[k]);
  }
  html += "</ol>\n";
  if (pareto.frontier.empty()) html += "<p class=\"note\">No run could be compared.</p>\n";
  return html;
}

std::string sections_html(const std::vector<RunRecord>& records, const std::vector<ReportSection>& sections,
                          const RecordPareto& pareto) {
  std::string html;
  for (const auto& section : sections) {
    html += fmt::format("<section id=\"{}\"><h2>{}</h2>\n", html_escape(section.id), html_escape(section.title));
    for (const auto& chart : section.charts) {
      std::string notes;
      for (const auto& note : chart.notes) notes += fmt::format("<p class=\"note\">{}</p>", html_escape(note));
      if (chart.config.is_null()) {
        html += fmt::format("<figure class=\"chart note-only\" id=\"{}\"><h3>{}</h3>{}</figure>\n",
                            html_escape(chart.id), html_escape(chart.title), notes);
      } else {
        html += fmt::format(
            "<figure class=\"chart\"><div class=\"canvas-box\"><canvas id=\"{0}\" data-chart=\"{0}\" "
            "role=\"img\" aria-label=\"{1}\"></canvas></div><figcaption>{2}</figcaption></figure>\n",
            html_escape(chart.id), html_escape(chart.title), notes);
      }
    }
    if (section.id == "pareto" && !report::is_decoder_sweep(records)) html += pareto_list_html(records, pareto);
    html += "</section>\n";
  }
  return html;
}

std::string run_notes_html(const std::vector<RunRecord>& records) {
  std::vector<std::string> notes;
  for (const auto& r : records)
    for (const auto& note : r.notes) notes.push_back(fmt::format("{}: {}", r.run_name, note));
  if (notes.empty()) return "";
  return fmt::format(
      "<section id=\"notes\"><h2>Run notes</h2>\n<details><summary>{} note{}</summary>\n{}</details>"
      "</section>\n",
      notes.size(), notes.size() == 1 ? "" : "s", list_html(notes));
}

std::vector<RunTrace> find_traces(const std::vector<RunRecord>& records, const ReportOptions& options) {
  std::vector<RunTrace> traces;
  for (const auto& r : records) {
    for (const auto& dir : options.results_dirs) {
      const auto path = dir / "traces" / (r.run_name + ".csv");
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec)) continue;
      RunTrace t{r.run_name, path, {}};
      try {
        t.trace = read_power_trace(path);
      } catch (const Error& e) {
        t.trace.notes.push_back(e.what());  // drawn as a note: one bad trace does not sink the page
      }
      traces.push_back(std::move(t));
      break;
    }
  }
  return traces;
}

std::string missing_traces_note(const ReportOptions& options) {
  if (options.results_dirs.empty()) return "no power traces recorded";
  std::vector<std::string> places;
  for (const auto& dir : options.results_dirs) places.push_back((dir / "traces" / "<run_name>.csv").string());
  return fmt::format("no power traces recorded (looked for {}, as `qjoule energy --trace` writes)",
                     fmt::join(places, ", "));
}

}  // namespace

std::string render_html_report(const std::vector<RunRecord>& records, const ReportOptions& options) {
  if (records.empty()) fail("no run records to report");
  bench::precision_token(options.baseline);  // fails on a baseline that is not a precision
  const std::string chartjs = load_chartjs(options.chartjs.empty() ? chartjs_path() : options.chartjs);

  const RecordPareto pareto = pareto_of_records(records);
  const auto sections =
      build_report_charts(records, pareto, find_traces(records, options), missing_traces_note(options));
  nlohmann::json charts = nlohmann::json::object();
  for (const auto& section : sections)
    for (const auto& chart : section.charts)
      if (!chart.config.is_null()) charts[chart.id] = chart.config;
  const nlohmann::json data = {{"charts", charts}};
  const auto models = distinct(records, [](const RunRecord& r) { return r.config.model; });

  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n",
                      html_escape(kContentSecurityPolicy));
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += fmt::format("<title>qjoule report: {}</title>\n", joined_escaped(models));
  html += fmt::format("<script>{}</script>\n", detail::kErrorCaptureScript);
  html += fmt::format("<style>{}</style>\n</head>\n<body>\n", detail::kPageStyle);
  html += fmt::format(
      "<div id=\"qjoule-report-status\" hidden data-done=\"0\" data-charts-expected=\"{}\" "
      "data-charts-drawn=\"0\" data-errors=\"0\" data-csp-violations=\"0\"></div>\n",
      count_drawn_charts(sections));
  html += header_html(records, options);
  html += warnings_html(records);
  html += skipped_html(options.skipped);
  html += table_html(records, options);
  html += sections_html(records, sections, pareto);
  html += run_notes_html(records);
  html += fmt::format(
      "<footer>Every number comes from the run records (schema version {}, "
      "docs/bench-records.md). Charts: Chart.js, inlined.</footer>\n",
      bench::kRunRecordSchemaVersion);
  html += fmt::format("<script>{}</script>\n", script_for_inline_element(chartjs));
  html += fmt::format("<script type=\"application/json\" id=\"qjoule-report-data\">{}</script>\n",
                      json_for_script_element(data));
  html += fmt::format("<script>{}</script>\n</body>\n</html>\n", detail::kPageScript);
  return html;
}

void write_html_report(const std::vector<RunRecord>& records, const std::filesystem::path& out,
                       const ReportOptions& options) {
  ReportOptions effective = options;
  if (effective.results_dirs.empty())
    effective.results_dirs.push_back(out.has_parent_path() ? out.parent_path() : std::filesystem::path("."));
  io::write_file_atomically(out, render_html_report(records, effective));
}

bench::HtmlReportWriter sweep_html_writer() {
  return [](const std::vector<RunRecord>& records, const std::filesystem::path& html, double max_accuracy_drop,
            double max_ppl_increase_pct) {
    ReportOptions options;
    options.max_accuracy_drop_pt = max_accuracy_drop;
    options.max_ppl_increase_pct = max_ppl_increase_pct;
    write_html_report(records, html, options);
  };
}

}  // namespace qjoule::report

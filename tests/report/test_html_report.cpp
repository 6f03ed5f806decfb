// The report page without a browser: self-contained (CSP, nothing fetched), the table's numbers,
// energy that is unavailable (its reason, never 0), the charts' data, notes instead of charts,
// skipped lines, escaping, the Pareto list, Chart.js missing, and writing the file.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/bench/paper_table.h"
#include "qjoule/error.h"
#include "qjoule/report/chartjs_source.h"
#include "qjoule/report/html_report.h"
#include "qjoule/report/record_pareto.h"
#include "qjoule/report/validity_warnings.h"
#include "html_attributes.h"
#include "sample_results.h"
#include "test_paths.h"

namespace qjoule::report {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;
namespace sample = test::report_sample;

// A stand-in for Chart.js: these tests read the page's text, they do not run it.
ReportOptions options_with_fake_chartjs(const std::string& test_name) {
  const auto dir = test::temp_dir(test_name);
  std::ofstream(dir / "chart.min.js") << "/* fake Chart.js */ window.Chart = function () {};";
  ReportOptions options;
  options.chartjs = dir / "chart.min.js";
  return options;
}

// The JSON the page's script reads (escaped "<\/" is still JSON).
nlohmann::json page_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"qjoule-report-data\">";
  const auto begin = html.find(open);
  if (begin == std::string::npos) return nullptr;
  const auto end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const bench::RunRecord& find_run(const std::vector<bench::RunRecord>& records, const std::string& precision,
                                 std::size_t batch) {
  for (const auto& r : records)
    if (r.config.precision == precision && r.config.batch == batch) return r;
  throw std::runtime_error("no such sample run");
}

TEST(ReportHtml, IsSelfContainedBehindAContentSecurityPolicy) {
  const auto html = render_html_report(sample::records(), options_with_fake_chartjs("report_html_csp"));
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_THAT(html, HasSubstr("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src &#39;none&#39;; "
                              "script-src &#39;unsafe-inline&#39;; style-src &#39;unsafe-inline&#39;; "
                              "img-src data:\">"));
  EXPECT_THAT(html, Not(HasSubstr(" src=")));
  EXPECT_THAT(html, Not(HasSubstr(" href=")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  // The error counter is the first script, before the CSP-governed rest runs.
  const auto first_script = html.find("<script>");
  EXPECT_LT(html.find("Content-Security-Policy"), first_script);
  EXPECT_EQ(html.find("securitypolicyviolation"), html.find("securitypolicyviolation", first_script));
  EXPECT_LT(html.find("console.error = function"), html.find("<style>"));
  EXPECT_EQ(count(html, "<script"), 4u);
  EXPECT_EQ(count(html, "</script>"), 4u);
  EXPECT_THAT(html, HasSubstr("fake Chart.js"));
  EXPECT_THAT(html, HasSubstr("id=\"qjoule-report-status\" hidden data-done=\"0\""));
}

TEST(ReportHtml, HeaderNamesModelDeviceEnvironmentAndDates) {
  auto records = sample::records();
  records.at(0).environment["host_capacity"] = {{"busy", ""}, {"fp32_gflops_before", 401.5}};
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_header"));
  EXPECT_THAT(html, HasSubstr("<h1>qjoule report: distilbert-base</h1>"));
  EXPECT_THAT(html, HasSubstr("<dt>device</dt><dd>cpu</dd>"));
  EXPECT_THAT(html, HasSubstr("<dt>cpu</dt><dd>AMD EPYC 7B13</dd>"));
  EXPECT_THAT(html, HasSubstr("<dt>isa</dt><dd>avx avx2 fma f16c hypervisor</dd>"));
  EXPECT_THAT(html, HasSubstr("<dt>qjoule_commit</dt><dd>3390ad5d1e2f</dd>"));
  EXPECT_THAT(html, HasSubstr("started 2026-11-23T19:00:02Z to 2026-11-23T19:13:02Z"));
  EXPECT_THAT(html, HasSubstr("<dt>onednn</dt><dd>2.6.3</dd>"));  // the other keys, in <details>
  EXPECT_THAT(html, Not(HasSubstr("<dt>host_capacity</dt>")));    // each run's own, not the machine's
}

TEST(ReportHtml, ValidityWarningsComeFirstAndNameTheRuns) {
  const auto records = sample::records();
  const auto warnings = validity_warnings(records);
  std::vector<std::string> kinds;
  for (const auto& w : warnings) kinds.push_back(w.kind);
  EXPECT_THAT(kinds, ElementsAre("energy-unavailable", "energy-estimated", "emulated", "failed", "energy-flagged"));
  EXPECT_THAT(warnings[0].items[0], HasSubstr("no energy sensor: rapl:"));
  EXPECT_THAT(warnings[0].items[0], HasSubstr(find_run(records, "w8", 8).run_name));
  EXPECT_THAT(warnings[4].items[0], HasSubstr(find_run(records, "int4", 1).run_name +
                                              ": sensor rapl:package-0 INVALID (flags: short_window)"));

  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_warnings"));
  EXPECT_LT(html.find("id=\"validity\" class=\"box warn\""), html.find("id=\"paper-table\""));
  for (const auto& kind : kinds) EXPECT_THAT(html, HasSubstr("data-kind=\"" + kind + "\""));
  EXPECT_THAT(html, HasSubstr("estimated: cpu-tdp=65 W x utilisation 0.97"));
}

TEST(ReportHtml, ADecoderRunShowsDecodeThroughputAndItsDecodeWindowsFlags) {
  auto records = sample::records();
  bench::RunRecord d = records.front();  // a measured fp32 run, made a decoder run
  d.config.model = "tiny-llama";
  d.config.seq = 64;
  d.run_name = bench::run_name(d.config);
  d.prefill_tokens = 64;
  d.prefill_tokens_per_s_mean = 1234.5;
  d.prefill_tokens_per_s_std = 10.0;
  d.prefill_mj_per_token = d.energy_mj_per_token;
  d.decode_tokens = 32;
  d.decode_iters = 5;
  d.decode_tokens_per_s_mean = 321.5;
  d.decode_tokens_per_s_std = 4.0;
  d.decode_ms_per_token_mean = 3.1;
  d.decode_energy_j = 19.0;
  d.decode_mj_per_token = 80.0;
  d.decode_energy_window = sample::energy_window("decode", 0.5, 19.0, true);
  records.push_back(d);
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_decoder"));
  EXPECT_THAT(html, HasSubstr("<th>decode tok/s</th>"));
  EXPECT_THAT(html, HasSubstr("<td class=\"num\">321.5</td>"));
  EXPECT_THAT(html, HasSubstr(d.run_name + " (decode): sensor rapl:package-0 INVALID (flags: short_window)"));
  EXPECT_THAT(html, Not(HasSubstr(d.run_name + " (prefill): sensor")));  // its prefill window is clean
}

TEST(ReportHtml, TableHasThePaperTableNumbersAndUnavailableEnergyWithItsReason) {
  const auto records = sample::records();
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_table"));
  const auto table = bench::build_paper_table(records, 1.0);
  ASSERT_EQ(table.rows.size(), records.size() - 1);  // all but the failed run
  for (const auto& row : table.rows) {
    const auto& r = records[row.record];
    const auto begin = html.find("<tr data-run=\"" + r.run_name + "\"");
    ASSERT_NE(begin, std::string::npos) << r.run_name;
    const std::string tr = html.substr(begin, html.find("</tr>", begin) - begin);
    for (std::size_t c = 0; c < row.cells.size(); ++c) {
      EXPECT_THAT(tr, HasSubstr(">" + row.cells[c] + "</td>")) << "column " << table.columns[c].header;
    }
  }
  const auto& no_energy = find_run(records, "w8", 8);
  const auto begin = html.find("<tr data-run=\"" + no_energy.run_name + "\"");
  const std::string tr = html.substr(begin, html.find("</tr>", begin) - begin);
  // The footnote mark in the cell (as summary.md has it), the whole reason on hover and in the legend.
  EXPECT_THAT(tr, HasSubstr("<td class=\"num unavailable\" title=\"no energy sensor: rapl: "
                            "/sys/class/powercap/intel-rapl:0/energy_uj is not readable (Permission denied); "
                            "nvml: libnvidia-ml.so.1 not found\">n/a [1]</td>"));
  EXPECT_THAT(html, HasSubstr("n/a [1] energy unavailable: no energy sensor: rapl: "));
  EXPECT_THAT(html,
              HasSubstr(fmt::format(">{:.4g} (est.)</td>", *find_run(records, "bf16", 8).energy_j_per_inference)));
  EXPECT_THAT(html, HasSubstr("<th>J/inference</th>"));
  EXPECT_THAT(html, HasSubstr("class=\"sortable\""));
  EXPECT_THAT(html, HasSubstr("<div id=\"failed-runs\"><h3>Failed runs</h3>"));
}

TEST(ReportHtml, UnavailableEnergyIsNeverDrawnAsZero) {
  const auto records = sample::records();
  const auto data = page_data(render_html_report(records, options_with_fake_chartjs("report_html_no_zero")));
  const auto& energy = data["charts"]["chart-energy"];
  ASSERT_TRUE(energy.is_object()) << data.dump(2);
  const auto labels = energy["data"]["labels"].get<std::vector<std::string>>();
  const auto w8 = std::find(labels.begin(), labels.end(), "w8") - labels.begin();
  bool saw_bs8_gross = false;
  for (const auto& dataset : energy["data"]["datasets"]) {
    for (const auto& value : dataset["data"]) EXPECT_NE(value, 0.0) << dataset.dump();
    if (dataset["label"] == "bs8 gross") {
      saw_bs8_gross = true;
      EXPECT_TRUE(dataset["data"][static_cast<std::size_t>(w8)].is_null()) << dataset.dump();
    }
  }
  EXPECT_TRUE(saw_bs8_gross) << energy.dump();
}

TEST(ReportHtml, WithoutAnyEnergyTheChartsSayWhyAndParetoUsesLatency) {
  auto records = sample::records();
  for (auto& r : records) bench::clear_energy(r, "no energy sensor: RAPL masked in a container");
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_no_energy"));
  const auto data = page_data(html);
  EXPECT_FALSE(data["charts"].contains("chart-energy"));
  EXPECT_THAT(html, HasSubstr("Energy unavailable for every run, so nothing is drawn:"));
  // The reason every run shares is said once, with the runs it covers (not once a run).
  EXPECT_THAT(html, HasSubstr(records[0].run_name + ", " + records[1].run_name + ", "));
  std::size_t said = 0;
  for (auto at = html.find(": unavailable (no energy sensor"); at != std::string::npos;
       at = html.find(": unavailable (no energy sensor", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << "once, for " << records.size() << " runs";
  EXPECT_THAT(data["charts"]["chart-pareto"]["options"]["plugins"]["title"]["text"].get<std::string>(),
              HasSubstr("p50 latency vs accuracy (no run has energy: latency stands in)"));
  EXPECT_THAT(html, Not(HasSubstr(">0 (est.)")));
}

TEST(ReportHtml, ParetoListNamesTheFrontierCheapestFirst) {
  const auto records = sample::records();
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_pareto"));
  const auto p = pareto_of_records(records);
  ASSERT_FALSE(p.frontier.empty());
  const auto begin = html.find("<ol id=\"pareto-list\">");
  ASSERT_NE(begin, std::string::npos);
  const std::string list = html.substr(begin, html.find("</ol>", begin) - begin);
  const std::vector<std::string> listed = test::attribute_values(list, "data-run");
  std::vector<std::string> expected;
  for (const auto index : p.frontier) expected.push_back(records[index].run_name);
  EXPECT_EQ(listed, expected);
  // Never the emulated run (it would be cheap and accurate) nor the failed one.
  EXPECT_THAT(list, Not(HasSubstr("emulated")));
  EXPECT_THAT(list, Not(HasSubstr("nf4_dq")));
  const auto data = page_data(html);
  const auto& scatter = data["charts"]["chart-pareto"];
  EXPECT_EQ(scatter["data"]["datasets"][0]["label"], "Pareto frontier");
  EXPECT_EQ(scatter["data"]["datasets"][0]["data"].size(), p.frontier.size());
  EXPECT_EQ(scatter["data"]["datasets"][0]["showLine"], true);
}

// A decoder sweep's speed in a decoder's units: latency per phase in ms, prefill and decode tokens/s
// (not an encoder's ms per batch and sequences/s).
TEST(ReportHtml, ADecoderSweepChartsItsSpeedPerPhase) {
  const auto records = sample::decoder_records();
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_decoder_speed"));
  const auto charts = page_data(html)["charts"];
  for (const char* id : {"chart-phase-latency", "chart-prefill-throughput", "chart-decode-throughput"})
    ASSERT_TRUE(charts.contains(id)) << id;
  EXPECT_FALSE(charts.contains("chart-latency"));
  EXPECT_FALSE(charts.contains("chart-throughput"));
  EXPECT_THAT(html, Not(HasSubstr("sequences/s")));  // the scaling charts too
  EXPECT_THAT(html, HasSubstr("Batch scaling: decode throughput (tokens/s)"));
  const auto& latency = charts["chart-phase-latency"]["data"];
  ASSERT_EQ(latency["datasets"].size(), 2u);
  EXPECT_EQ(latency["datasets"][0]["label"], "prefill");
  EXPECT_EQ(latency["datasets"][1]["label"], "decode");
  EXPECT_EQ(latency["labels"][2], "int4");
  EXPECT_DOUBLE_EQ(latency["datasets"][1]["data"][2].get<double>(), *records[2].decode_ms_per_token_mean);
  EXPECT_DOUBLE_EQ(latency["datasets"][0]["data"][2].get<double>(), records[2].latency->p50_ms);
  EXPECT_DOUBLE_EQ(charts["chart-decode-throughput"]["data"]["datasets"][0]["data"][2].get<double>(),
                   *records[2].decode_tokens_per_s_mean);
  EXPECT_DOUBLE_EQ(charts["chart-prefill-throughput"]["data"]["datasets"][0]["data"][2].get<double>(),
                   *records[2].prefill_tokens_per_s_mean);
  EXPECT_EQ(charts["chart-decode-throughput"]["options"]["scales"]["y"]["title"]["text"], "tokens/s");
}

// `bench --task`: each task's Δacc per precision with its paired whisker, drawn in the quality section
// beside the text's charts (ΔPPL and KL with theirs); every series named.
TEST(ReportHtml, ADecoderSweepWithTasksChartsEachTasksDeltaWithWhiskers) {
  auto records = sample::decoder_records();
  for (std::size_t i = 0; i < records.size(); ++i)
    records[i].tasks = {
        {"arc", {{"acc", 0.25 + 0.01 * double(i)}, {"delta_acc", 0.01 * double(i)}, {"delta_acc_stderr", 0.005}}},
        {"hellaswag", {{"acc", 0.5}, {"delta_acc", 0.0}}}};
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_tasks"));
  const auto charts = page_data(html)["charts"];
  ASSERT_TRUE(charts.contains("chart-tasks"));
  const auto& data = charts["chart-tasks"]["data"];
  ASSERT_EQ(data["datasets"].size(), 3u) << "arc, its whiskers, hellaswag (no error: no whiskers)";
  EXPECT_EQ(data["datasets"][0]["label"], "arc Δacc");
  EXPECT_EQ(data["datasets"][1]["label"], "arc Δacc ± standard error");
  EXPECT_EQ(data["datasets"][2]["label"], "hellaswag Δacc");
  EXPECT_DOUBLE_EQ(data["datasets"][0]["data"][2].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(data["datasets"][1]["data"][2][0].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(data["datasets"][1]["data"][2][1].get<double>(), 2.5);
  EXPECT_EQ(data["datasets"][0]["stack"], data["datasets"][1]["stack"]) << "a whisker shares its bar's slot";
  EXPECT_LT(data["datasets"][1]["order"], data["datasets"][0]["order"]) << "and is drawn over it";
  EXPECT_NE(data["datasets"][0]["stack"], data["datasets"][2]["stack"]);
  EXPECT_EQ(charts["chart-tasks"]["options"]["scales"]["y"]["stacked"], false) << "whiskers are not added up";
  ASSERT_TRUE(charts.contains("chart-delta-ppl")) << "the text's charts stay beside it";
  const auto& ppl = charts["chart-delta-ppl"]["data"]["datasets"];
  ASSERT_EQ(ppl.size(), 2u);
  EXPECT_EQ(ppl[0]["label"], "ΔPPL");
  EXPECT_DOUBLE_EQ(ppl[0]["data"][2].get<double>(), *records[2].lm_delta_ppl);
  EXPECT_DOUBLE_EQ(ppl[1]["data"][2][1].get<double>(), *records[2].lm_delta_ppl + *records[2].lm_delta_ppl_stderr);
  EXPECT_EQ(charts["chart-kl"]["data"]["datasets"][0]["label"], "mean KL");
  EXPECT_THAT(html, Not(HasSubstr("\"label\":\"value\""))) << "every series is named";
  EXPECT_THAT(html, HasSubstr("Quality: task accuracy and the text"));
  // The task table beside the paper table; no FP32 figures in these records: Δacc is a dash.
  EXPECT_THAT(html, HasSubstr("<table id=\"task-table\""));
  EXPECT_THAT(html, HasSubstr("<th>arc acc</th><th>Δacc</th><th>changed</th><th>hellaswag acc</th>"));
}

TEST(ReportHtml, ScalingChartsNeedTwoValuesElseANote) {
  const auto html = render_html_report(sample::records(), options_with_fake_chartjs("report_html_scaling"));
  const auto data = page_data(html);
  ASSERT_TRUE(data["charts"].contains("chart-batch-scaling"));
  EXPECT_EQ(data["charts"]["chart-batch-scaling"]["data"]["datasets"][0]["data"].size(), 2u);  // fp32 at bs 1, 8
  EXPECT_FALSE(data["charts"].contains("chart-seq-scaling"));
  EXPECT_THAT(html, HasSubstr("needs ≥ 2 sequence lengths (these runs have only one: 128)"));
  for (const char* id :
       {"chart-latency", "chart-throughput", "chart-energy", "chart-accuracy", "chart-pareto", "chart-size"})
    EXPECT_TRUE(data["charts"].contains(id)) << id;
  for (const auto& [id, config] : data["charts"].items()) {
    EXPECT_EQ(config["options"]["animation"], false) << id;
    EXPECT_THAT(html, HasSubstr("<canvas id=\"" + id + "\" data-chart=\"" + id + "\""));
  }
  EXPECT_THAT(html, HasSubstr("data-charts-expected=\"" + std::to_string(data["charts"].size()) + "\""));
}

TEST(ReportHtml, PowerTracesFromTheResultsFolderElseANote) {
  auto options = options_with_fake_chartjs("report_html_traces");
  const auto without = render_html_report(sample::records(), options);
  EXPECT_THAT(without, HasSubstr("no power traces recorded"));
  EXPECT_FALSE(page_data(without)["charts"].contains("chart-trace-0"));

  options.results_dirs = {test::temp_dir("report_html_traces_empty"), test::fixtures_dir() / "report"};
  const auto with = render_html_report(sample::records(), options);
  const auto data = page_data(with);
  ASSERT_TRUE(data["charts"].contains("chart-trace-0")) << with;
  EXPECT_THAT(data["charts"]["chart-trace-0"]["options"]["plugins"]["title"]["text"].get<std::string>(),
              HasSubstr(sample::int8_bs1_run()));
  EXPECT_EQ(data["charts"]["chart-trace-0"]["data"]["datasets"].size(), 2u);
  EXPECT_THAT(with, Not(HasSubstr("no power traces recorded")));
}

TEST(ReportHtml, SkippedLinesAreNamedInAVisibleBox) {
  auto options = options_with_fake_chartjs("report_html_skipped");
  options.skipped = {{"out/results.jsonl", 15, "truncated last line (no newline at the end, 57 bytes): not JSON"}};
  const auto html = render_html_report(sample::records(), options);
  EXPECT_THAT(html, HasSubstr("<section id=\"skipped\" class=\"box skipped\"><h2>Skipped (1 line)</h2>"));
  EXPECT_THAT(html, HasSubstr("<li><code>out/results.jsonl:15</code>: truncated last line"));
  EXPECT_THAT(render_html_report(sample::records(), options_with_fake_chartjs("report_html_skipped2")),
              Not(HasSubstr("id=\"skipped\"")));
}

TEST(ReportHtml, RecordTextIsEscapedEverywhere) {
  auto records = sample::records();
  records[0].config.model = "<b>model</b>";
  records[0].notes.push_back("a note with </script><script>alert(1)</script>");
  records[1].energy_window = nullptr;
  records[1].energy_j.reset();
  records[1].energy_net_j.reset();
  records[1].energy_j_per_inference.reset();
  records[1].energy_mj_per_token.reset();
  records[1].energy_method.clear();
  records[1].energy_unavailable = "reason with </script> & <tags>";
  const auto html = render_html_report(records, options_with_fake_chartjs("report_html_escape"));
  EXPECT_THAT(html, Not(HasSubstr("<b>model</b>")));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;model&lt;/b&gt;"));
  EXPECT_THAT(html, HasSubstr("unavailable (reason with &lt;/script&gt; &amp; &lt;tags&gt;)"));
  EXPECT_EQ(count(html, "</script>"), 4u);  // only the page's own four scripts end
  EXPECT_NO_THROW(page_data(html));
}

TEST(ReportHtml, ABaselineOtherThanFp32) {
  auto options = options_with_fake_chartjs("report_html_baseline");
  options.baseline = "bf16";
  const auto records = sample::records();
  const auto html = render_html_report(records, options);
  EXPECT_THAT(html, HasSubstr("Deltas against the bf16 run"));
  const auto& bf16 = find_run(records, "bf16", 1);
  const auto begin = html.find("<tr data-run=\"" + bf16.run_name + "\"");
  EXPECT_THAT(html.substr(begin, html.find("</tr>", begin) - begin), HasSubstr("baseline"));
  options.baseline = "";
  EXPECT_THROW(render_html_report(sample::records(), options), Error);
}

TEST(ReportHtml, ChartJsMissingFailsWithTheInstallHint) {
  auto options = options_with_fake_chartjs("report_html_no_chartjs");
  options.chartjs = "/nonexistent/chart.min.js";
  try {
    render_html_report(sample::records(), options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "Chart.js not found at '/nonexistent/chart.min.js': install Debian's "
              "libjs-chart.js (or set QJOULE_CHARTJS)");
  }
}

TEST(ReportHtml, ChartJsPathComesFromTheEnvironment) {
  const char* saved = std::getenv(kChartJsEnvVar);
  const std::string previous = saved ? saved : "";
  ::setenv(kChartJsEnvVar, "/opt/chart.js", 1);
  EXPECT_EQ(chartjs_path(), fs::path("/opt/chart.js"));
  ::setenv(kChartJsEnvVar, "", 1);
  EXPECT_EQ(chartjs_path(), fs::path(kDebianChartJsPath));
  if (saved)
    ::setenv(kChartJsEnvVar, previous.c_str(), 1);
  else
    ::unsetenv(kChartJsEnvVar);
  EXPECT_THROW(load_chartjs("/nonexistent/chart.min.js"), Error);
}

TEST(ReportHtml, NoRecordsFails) {
  EXPECT_THROW(render_html_report({}, options_with_fake_chartjs("report_html_none")), Error);
}

TEST(ReportHtml, WritesAtomicallyAndFailsInOneLineWhereItCannot) {
  const auto dir = test::temp_dir("report_html_write");
  const auto options = options_with_fake_chartjs("report_html_write_js");
  write_html_report(sample::records(), dir / "report.html", options);
  std::ifstream in(dir / "report.html");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("</html>\n"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "no temporary left";

  std::ofstream(dir / "a-file") << "x";
  try {
    write_html_report(sample::records(), dir / "a-file" / "report.html", options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write '" + (dir / "a-file" / "report.html").string() + "': Not a directory");
  }
}

TEST(ReportHtml, WriteLooksForTracesBesideTheReport) {
  const auto dir = test::temp_dir("report_html_bench_dir");
  fs::create_directories(dir / "traces");
  fs::copy_file(test::fixtures_dir() / "report" / "traces" / (sample::int8_bs1_run() + ".csv"),
                dir / "traces" / (sample::int8_bs1_run() + ".csv"));
  write_html_report(sample::records(), dir / "report.html", options_with_fake_chartjs("report_html_bench_js"));
  std::ifstream in(dir / "report.html");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(page_data(text.str())["charts"].contains("chart-trace-0"));
}

}  // namespace
}  // namespace qjoule::report

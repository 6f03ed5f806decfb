// The report page in a real browser: headless Chromium loads the sample report from a file:// URL
// with Debian's Chart.js inlined, and the page's own status element says whether every chart drew,
// whether any script error or Content-Security-Policy violation happened, and that it finished.
// Skips (naming the package) where chromium or libjs-chart.js is not installed.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/report/chartjs_source.h"
#include "qjoule/report/html_report.h"
#include "qjoule/report/record_pareto.h"
#include "qjoule/report/tolerant_reader.h"
#include "run_command.h"
#include "sample_results.h"
#include "html_attributes.h"
#include "test_paths.h"

namespace qjoule::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

fs::path find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

#define QJOULE_REQUIRE_BROWSER()                                                                              \
  do {                                                                                                        \
    if (find_on_path("chromium").empty())                                                                     \
      GTEST_SKIP() << "chromium not found on PATH: install Debian's package `chromium` for the browser test"; \
    if (!fs::is_regular_file(chartjs_path()))                                                                 \
      GTEST_SKIP() << "Chart.js not found at " << chartjs_path() << ": install Debian's libjs-chart.js";      \
  } while (0)

fs::path sample_results() { return test::fixtures_dir() / "report" / "results.jsonl"; }

// Reads results the way `qjoule report` does and writes the page to `out`.
ReadResults render(const fs::path& results, const fs::path& out) {
  auto read = read_results_tolerantly({results});
  ReportOptions options;
  options.results_dirs = {results.parent_path()};
  options.inputs = {results};
  options.skipped = read.skipped;
  write_html_report(read.records, out, options);
  return read;
}

// Runs headless Chromium on the page with extra arguments; returns its stdout (stderr goes to a log
// beside the page, shown when the test fails).
std::string chromium(const fs::path& page, const std::string& args) {
  const fs::path dir = page.parent_path();
  const std::string command =
      "timeout 180 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run "
      "--user-data-dir=" +
      (dir / "chromium-profile").string() + " --window-size=1400,4000 --virtual-time-budget=10000 " + args +
      " 'file://" + page.string() + "' > " + (dir / "chromium.out").string() + " 2> " + (dir / "chromium.log").string();
  const auto result = test::run_command(command);
  EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.output << read_text(dir / "chromium.log");
  return read_text(dir / "chromium.out");
}

// The attributes of the page's status element in the DOM the browser dumped.
std::map<std::string, std::string> status_of(const std::string& dom) {
  std::map<std::string, std::string> attributes;
  const auto begin = dom.find("id=\"qjoule-report-status\"");
  if (begin == std::string::npos) return attributes;
  const auto tag_begin = dom.rfind('<', begin);
  const std::string tag = dom.substr(tag_begin, dom.find('>', begin) - tag_begin);
  for (const auto& [name, value] : test::attributes_with_prefix(tag, "data-")) attributes[name] = value;
  return attributes;
}

std::vector<std::string> pareto_list_of(const std::string& dom) {
  std::vector<std::string> names;
  const auto begin = dom.find("<ol id=\"pareto-list\">");
  if (begin == std::string::npos) return names;
  const std::string list = dom.substr(begin, dom.find("</ol>", begin) - begin);
  return test::attribute_values(list, "data-run");
}

void expect_page_drew_cleanly(const std::string& dom, const fs::path& page) {
  const auto status = status_of(dom);
  ASSERT_FALSE(status.empty()) << "no #qjoule-report-status in the DOM of " << page << ":\n" << dom.substr(0, 2000);
  EXPECT_EQ(status.at("data-done"), "1") << page;
  EXPECT_EQ(status.at("data-errors"), "0") << page << "\n" << read_text(page.parent_path() / "chromium.log");
  EXPECT_EQ(status.at("data-csp-violations"), "0") << page;
  EXPECT_GT(std::stoi(status.at("data-charts-expected")), 0);
  EXPECT_EQ(status.at("data-charts-drawn"), status.at("data-charts-expected")) << page;
}

TEST(ReportChromium, SampleReportDrawsEveryChartWithoutErrors) {
  QJOULE_REQUIRE_BROWSER();
  const auto page = test::temp_dir("report_chromium_dom") / "report.html";
  const auto read = render(sample_results(), page);
  const std::string dom = chromium(page, "--dump-dom");
  expect_page_drew_cleanly(dom, page);
  // All but sequence-length scaling, + a power trace and the roofline.
  EXPECT_EQ(status_of(dom).at("data-charts-expected"), "9");
  // The roofline: one point per successful run (the failed one has no roof), on the machine's roofs.
  const auto roofline = dom.find("data-chart=\"chart-roofline\"");
  ASSERT_NE(roofline, std::string::npos);
  const std::string canvas = dom.substr(roofline, dom.find('>', roofline) - roofline);
  const auto ok = std::count_if(read.records.begin(), read.records.end(),
                                [](const bench::RunRecord& r) { return r.status == "ok"; });
  EXPECT_THAT(canvas, HasSubstr("data-points=\"" + std::to_string(ok) + "\"")) << canvas;
  EXPECT_THAT(dom, HasSubstr("memory read 40.0 GB/s"));

  std::vector<std::string> expected;
  for (const auto index : pareto_of_records(read.records).frontier) expected.push_back(read.records[index].run_name);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(pareto_list_of(dom), expected);
}

// A decoder sweep scored on a text: the decoder table (PPL, ΔPPL, mean KL) and both trade-off charts
// draw; a cell whose energy is unavailable holds its footnote mark only, the reason in the legend.
TEST(ReportChromium, DecoderSweepDrawsItsTableAndParetoCharts) {
  QJOULE_REQUIRE_BROWSER();
  const auto dir = test::temp_dir("report_chromium_decoder");
  std::string jsonl;
  for (const auto& r : test::report_sample::decoder_records()) jsonl += bench::to_json(r).dump() + "\n";
  std::ofstream(dir / "results.jsonl", std::ios::binary) << jsonl;
  const auto read = render(dir / "results.jsonl", dir / "report.html");
  ASSERT_EQ(read.records.size(), 5u);
  const std::string dom = chromium(dir / "report.html", "--dump-dom");
  expect_page_drew_cleanly(dom, dir / "report.html");
  for (const char* chart : {"chart-pareto-decode-speed", "chart-pareto-decode-energy", "chart-delta-ppl", "chart-kl",
                            "chart-phase-latency", "chart-prefill-throughput", "chart-decode-throughput"})
    EXPECT_THAT(dom, HasSubstr(std::string("data-chart=\"") + chart + "\"")) << chart;
  for (const char* header : {"<th>decode tok/s</th>", "<th>PPL</th>", "<th>ΔPPL</th>", "<th>mean KL</th>"})
    EXPECT_THAT(dom, HasSubstr(header));
  EXPECT_THAT(dom, HasSubstr("+0.5050 ± 0.0705 (+6.50%) !"));  // nf4:dq over the 5% default, ± its paired error
  EXPECT_THAT(dom, HasSubstr("Perplexity increase above 5%"));
  const auto table_begin = dom.find("<table id=\"paper-table\"");
  ASSERT_NE(table_begin, std::string::npos);
  const std::string table = dom.substr(table_begin, dom.find("</table>", table_begin) - table_begin);
  EXPECT_THAT(table, HasSubstr(">n/a [1]</td>"));
  // No cell holds a sensor reason (the title attribute holds it for hovering; the legend lists it).
  for (std::size_t at = table.find("<td"); at != std::string::npos; at = table.find("<td", at + 1)) {
    const auto open_end = table.find('>', at);
    const std::string text = table.substr(open_end + 1, table.find("</td>", open_end) - open_end - 1);
    EXPECT_LE(text.size(), 48u) << text;
    EXPECT_THAT(text, Not(HasSubstr("powercap")));
  }
  EXPECT_THAT(dom, HasSubstr("n/a [1] decode energy unavailable: no sensor that counts in the total had a value"));
}

TEST(ReportChromium, ScreenshotOfTheSampleReport) {
  QJOULE_REQUIRE_BROWSER();
  const auto page = test::temp_dir("report_chromium_png") / "report.html";
  render(sample_results(), page);
  const fs::path png = test::binary_dir() / "report.png";
  std::error_code ec;
  fs::remove(png, ec);
  chromium(page, "--screenshot=" + png.string());
  ASSERT_TRUE(fs::exists(png)) << read_text(page.parent_path() / "chromium.log");
  EXPECT_GT(fs::file_size(png), 10u * 1024);
  EXPECT_EQ(read_text(png).substr(1, 3), "PNG");
}

// The status is not zero by construction: a script error, a blocked fetch and a chart that cannot
// be drawn all show in it.
TEST(ReportChromium, TheStatusCountsErrorsViolationsAndUndrawnCharts) {
  QJOULE_REQUIRE_BROWSER();
  const auto page = test::temp_dir("report_chromium_broken") / "report.html";
  render(sample_results(), page);
  std::string html = read_text(page);
  const std::string chart_type = "\"type\":\"bar\"";
  ASSERT_NE(html.find(chart_type), std::string::npos);
  html.replace(html.find(chart_type), chart_type.size(), "\"type\":\"no-such-chart-type\"");
  html.replace(html.rfind("</body>"), 7,
               "<img src=\"https://example.invalid/x.png\" alt=\"\"><script>noSuchFunction();</script></body>");
  std::ofstream(page, std::ios::binary) << html;
  const auto status = status_of(chromium(page, "--dump-dom"));
  ASSERT_FALSE(status.empty());
  EXPECT_EQ(status.at("data-done"), "1");
  EXPECT_GE(std::stoi(status.at("data-errors")), 2);  // the broken chart, the script error
  EXPECT_GE(std::stoi(status.at("data-csp-violations")), 1);
  EXPECT_EQ(std::stoi(status.at("data-charts-drawn")), std::stoi(status.at("data-charts-expected")) - 1);
}

TEST(ReportChromium, TruncatedLastLineRendersAndTheSkippedLineIsNamed) {
  QJOULE_REQUIRE_BROWSER();
  const auto dir = test::temp_dir("report_chromium_torn");
  const std::string text = read_text(sample_results());
  const auto last_line = text.rfind('\n', text.size() - 2) + 1;  // a bench killed mid-write
  std::ofstream(dir / "results.jsonl", std::ios::binary) << text.substr(0, last_line + 100);
  const auto read = render(dir / "results.jsonl", dir / "report.html");
  ASSERT_EQ(read.skipped.size(), 1u);
  const std::string dom = chromium(dir / "report.html", "--dump-dom");
  expect_page_drew_cleanly(dom, dir / "report.html");
  EXPECT_THAT(dom, HasSubstr("Skipped (1 line)"));
  EXPECT_THAT(dom, HasSubstr((dir / "results.jsonl").string() + ":" + std::to_string(read.skipped[0].line) +
                             "</code>: truncated last line"));
}

}  // namespace
}  // namespace qjoule::report

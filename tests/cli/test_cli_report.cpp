// `qjoule report` end to end on the committed sample: a self-contained page, and bad input (no
// files, a missing file, an unwritable output) failing in one clear line.
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::run_command;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path sample() { return qjoule::test::fixtures_dir() / "report" / "results.jsonl"; }

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t line_count(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// A fake Chart.js keeps the CLI tests independent of libjs-chart.js (the browser test uses the real one).
std::string fake_chartjs(const fs::path& dir) {
  std::ofstream(dir / "chart.min.js") << "window.Chart = function () {};";
  return "QJOULE_CHARTJS=" + (dir / "chart.min.js").string() + " ";
}

TEST(CliReport, WritesASelfContainedPage) {
  const auto dir = qjoule::test::temp_dir("cli_report_ok");
  const auto out = dir / "out.html";
  const auto r = run_command(fake_chartjs(dir) + qjoule() + " report " + sample().string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wrote " + out.string() + " (14 runs)"));
  const std::string html = read_text(out);
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("Content-Security-Policy"));
  for (const char* reference : {"src=\"http", "href=\"http", "src='http", "href='http", "src=\"//", "href=\"//"})
    EXPECT_THAT(html, Not(HasSubstr(reference))) << reference;
  EXPECT_THAT(html, HasSubstr("chart-trace-0")) << "the sample's trace, from traces/ beside results.jsonl";
  EXPECT_THAT(html, HasSubstr("<ol id=\"pareto-list\">"));
}

TEST(CliReport, DefaultsToReportHtmlBesideTheResultsAndTakesAFolder) {
  const auto dir = qjoule::test::temp_dir("cli_report_default");
  fs::copy_file(sample(), dir / "results.jsonl");
  const auto r = run_command(fake_chartjs(dir) + qjoule() + " report " + dir.string() + " --baseline int8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_text(dir / "report.html"), HasSubstr("Deltas against the int8 run"));
}

TEST(CliReport, SkippedLinesAreWarnedAndNamedOnThePage) {
  const auto dir = qjoule::test::temp_dir("cli_report_torn");
  const std::string text = read_text(sample());
  std::ofstream(dir / "results.jsonl", std::ios::binary) << text << "{\"schema_version\": 1, \"run_na";
  const auto r = run_command(fake_chartjs(dir) + qjoule() + " report " + (dir / "results.jsonl").string() + " -o " +
                             (dir / "r.html").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string where = (dir / "results.jsonl").string() + ":15";
  EXPECT_THAT(r.output, HasSubstr("qjoule: warning: skipped " + where + ": truncated last line"));
  EXPECT_THAT(r.output, HasSubstr("1 line(s) skipped"));
  EXPECT_THAT(read_text(dir / "r.html"), HasSubstr(where + "</code>: truncated last line"));
}

TEST(CliReport, NoFilesIsAUsageError) {
  const auto r = run_command(qjoule() + " report -o x.html");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 1) << "CLI11's usage error, not a qjoule error";
  EXPECT_THAT(r.output, HasSubstr("files is required"));
}

TEST(CliReport, AMissingFileFailsInOneLineNamingIt) {
  const auto dir = qjoule::test::temp_dir("cli_report_missing");
  const auto missing = dir / "nope.jsonl";
  const auto r =
      run_command(fake_chartjs(dir) + qjoule() + " report " + missing.string() + " -o " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "qjoule: error: cannot read '" + missing.string() + "': No such file or directory\n");
  EXPECT_FALSE(fs::exists(dir / "r.html"));
}

TEST(CliReport, AnUnwritableOutputFailsInOneLine) {
  const auto dir = qjoule::test::temp_dir("cli_report_unwritable");
  std::ofstream(dir / "a-file") << "x";
  const auto out = dir / "a-file" / "report.html";
  const auto r = run_command(fake_chartjs(dir) + qjoule() + " report " + sample().string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1u) << r.output;
  EXPECT_THAT(r.output, HasSubstr("qjoule: error: cannot write '" + out.string() + "': Not a directory"));
}

TEST(CliReport, ChartJsMissingSaysWhatToInstall) {
  const auto dir = qjoule::test::temp_dir("cli_report_no_chartjs");
  const auto r = run_command("QJOULE_CHARTJS=" + (dir / "none.js").string() + " " + qjoule() + " report " +
                             sample().string() + " -o " + (dir / "r.html").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.output, "qjoule: error: Chart.js not found at '" + (dir / "none.js").string() +
                          "': install Debian's libjs-chart.js (or set QJOULE_CHARTJS)\n");
}

}  // namespace

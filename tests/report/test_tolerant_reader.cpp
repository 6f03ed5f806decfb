// The tolerant reader: what it keeps and what it skips (with file:line and why), and when it fails.
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/report/tolerant_reader.h"
#include "sample_results.h"
#include "test_paths.h"

namespace qjoule::report {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
namespace sample = test::report_sample;

fs::path write_results_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string line_of(const bench::RunRecord& r) { return bench::to_json(r).dump() + "\n"; }

TEST(ReportTolerantReader, ReadsEveryRecordOfACleanFile) {
  const auto dir = test::temp_dir("report_reader_clean");
  const auto results = read_results_tolerantly({write_results_file(dir / "results.jsonl", sample::results_jsonl())});
  EXPECT_EQ(results.records.size(), sample::records().size());
  EXPECT_TRUE(results.skipped.empty());
  ASSERT_EQ(results.sources.size(), results.records.size());
  EXPECT_EQ(results.sources[0], dir / "results.jsonl");
}

TEST(ReportTolerantReader, SkipsATruncatedLastLine) {
  const auto dir = test::temp_dir("report_reader_torn");
  const auto records = sample::records();
  const std::string torn = line_of(records[1]).substr(0, 120);  // a bench killed mid-write
  const auto file = write_results_file(dir / "results.jsonl", line_of(records[0]) + torn);
  const auto results = read_results_tolerantly({file});
  ASSERT_EQ(results.records.size(), 1u);
  ASSERT_EQ(results.skipped.size(), 1u);
  EXPECT_EQ(results.skipped[0].file, file);
  EXPECT_EQ(results.skipped[0].line, 2u);
  EXPECT_THAT(results.skipped[0].reason, HasSubstr("truncated last line"));
  EXPECT_THAT(results.skipped[0].reason, HasSubstr("not JSON"));
}

TEST(ReportTolerantReader, SkipsGarbageNewerSchemaAndBadRecordsButReadsTheRest) {
  const auto dir = test::temp_dir("report_reader_mixed");
  const auto records = sample::records();
  auto newer = bench::to_json(records[1]);
  newer["schema_version"] = 9;
  auto wrong_type = bench::to_json(records[2]);
  wrong_type["batch"] = "eight";
  const auto file = write_results_file(
      dir / "results.jsonl", line_of(records[0]) + "this is not json\n" + newer.dump() + "\n" + "\n" +
                                 wrong_type.dump() + "\n[1, 2]\n" + line_of(records[0]) + line_of(records[3]));
  const auto results = read_results_tolerantly({file});
  ASSERT_EQ(results.records.size(), 2u);
  EXPECT_EQ(results.records[1].run_name, records[3].run_name);
  ASSERT_EQ(results.skipped.size(), 5u);
  EXPECT_EQ(results.skipped[0].line, 2u);
  EXPECT_THAT(results.skipped[0].reason, HasSubstr("not JSON"));
  EXPECT_THAT(results.skipped[0].reason, ::testing::Not(HasSubstr("json.exception")));
  EXPECT_EQ(results.skipped[1].line, 3u);
  EXPECT_THAT(results.skipped[1].reason, HasSubstr("schema_version 9 is newer"));
  EXPECT_EQ(results.skipped[2].line, 5u);  // line 4 is blank: ignored, but counted
  EXPECT_THAT(results.skipped[2].reason, HasSubstr("batch"));
  EXPECT_EQ(results.skipped[3].line, 6u);
  EXPECT_THAT(results.skipped[3].reason, HasSubstr("expected an object"));
  EXPECT_EQ(results.skipped[4].line, 7u);
  EXPECT_THAT(results.skipped[4].reason, HasSubstr("already read at " + file.string() + ":1"));
}

// tests/fixtures/bench/results-v1.jsonl is this sample as qjoule wrote it at schema version 1.
TEST(ReportTolerantReader, Version1ResultsReadWithoutLoss) {
  const auto results = read_results_tolerantly({test::fixtures_dir() / "bench" / "results-v1.jsonl"});
  EXPECT_TRUE(results.skipped.empty());
  auto records = sample::records();
  ASSERT_EQ(results.records.size(), records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    // The sample without what version 4 added (the roofs and the machine's limits): a version-1
    // record has none of it.
    auto& r = records[i];
    for (auto* figure : {&r.roof_flops_per_token, &r.roof_bytes_per_token, &r.roof_gflops, &r.roof_gb_per_s,
                         &r.roof_limit_gflops, &r.roof_fraction, &r.decode_roof_flops_per_token,
                         &r.decode_roof_bytes_per_token, &r.decode_roof_gb_per_s, &r.decode_roof_fraction})
      figure->reset();
    r.roof_bound.clear();
    r.decode_roof_bound.clear();
    r.roof_unavailable.clear();
    r.environment.erase("machine_limits");
    EXPECT_EQ(bench::to_json(results.records[i]), bench::to_json(r)) << r.run_name;
  }
}

TEST(ReportTolerantReader, AnOlderSchemaVersionIsSkippedWithTheReadersReason) {
  const auto dir = test::temp_dir("report_reader_older");
  const auto records = sample::records();
  auto older = bench::to_json(records[1]);
  older["schema_version"] = 0;
  const auto results =
      read_results_tolerantly({write_results_file(dir / "results.jsonl", line_of(records[0]) + older.dump() + "\n")});
  ASSERT_EQ(results.skipped.size(), 1u);
  EXPECT_THAT(results.skipped[0].reason, HasSubstr("schema_version"));
}

TEST(ReportTolerantReader, SeveralFilesAndAFolderStandingForItsResults) {
  const auto dir = test::temp_dir("report_reader_many");
  const auto records = sample::records();
  fs::create_directories(dir / "a");
  write_results_file(dir / "a" / "results.jsonl", line_of(records[0]));
  const auto b = write_results_file(dir / "b.jsonl", line_of(records[1]) + line_of(records[0]));
  const auto results = read_results_tolerantly({dir / "a", b});
  ASSERT_EQ(results.records.size(), 2u);
  EXPECT_EQ(results.sources[0], dir / "a" / "results.jsonl");
  EXPECT_EQ(results.sources[1], b);
  ASSERT_EQ(results.skipped.size(), 1u);  // the repeated run
  EXPECT_EQ(results.skipped[0].line, 2u);
}

TEST(ReportTolerantReader, FailsClearlyWithoutAnyValidRecord) {
  const auto dir = test::temp_dir("report_reader_none");
  try {
    read_results_tolerantly({write_results_file(dir / "bad.jsonl", "garbage\n{\"schema_version\": 9}\n")});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no valid run records in"));
    EXPECT_THAT(e.what(), HasSubstr("2 line(s) skipped"));
    EXPECT_THAT(e.what(), HasSubstr("bad.jsonl:1"));
  }
  try {
    read_results_tolerantly({write_results_file(dir / "empty.jsonl", "")});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no run records in"));
  }
  EXPECT_THROW(read_results_tolerantly({}), Error);
}

TEST(ReportTolerantReader, AMissingFileFailsNamingIt) {
  const auto missing = test::temp_dir("report_reader_missing") / "nope.jsonl";
  try {
    read_results_tolerantly({missing});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read '" + missing.string() + "': No such file or directory");
  }
}

}  // namespace
}  // namespace qjoule::report

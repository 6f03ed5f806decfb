// The committed sample (tests/fixtures/report) is what make_report_sample writes, and every record
// in it is valid per docs/bench-record.schema.json and reads back.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "json_schema_subset.h"
#include "sample_results.h"
#include "test_paths.h"

namespace qjoule::report {
namespace {

namespace sample = test::report_sample;

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ReportSample, CommittedFixtureMatchesItsGenerator) {
  const auto dir = test::fixtures_dir() / "report";
  EXPECT_EQ(read_text(dir / "results.jsonl"), sample::results_jsonl())
      << "regenerate with make_report_sample tests/fixtures/report";
  EXPECT_EQ(read_text(dir / "traces" / (sample::int8_bs1_run() + ".csv")), sample::int8_bs1_trace_csv());
  EXPECT_LT(std::filesystem::file_size(dir / "results.jsonl"), 100u * 1024);
}

TEST(ReportSample, EveryRecordIsValidPerTheSchemaAndReadsBack) {
  const auto schema = nlohmann::json::parse(read_text(QJOULE_BENCH_RECORD_SCHEMA));
  std::size_t n = 0, failed = 0, emulated = 0, unavailable = 0;
  for (const auto& record : sample::records()) {
    const auto json = bench::to_json(record);
    const auto problems = test::validate_json_schema(schema, json);
    EXPECT_TRUE(problems.empty()) << record.run_name << ": " << problems.front();
    EXPECT_EQ(bench::to_json(bench::run_record_from_json(json)), json);
    failed += record.status == "failed";
    emulated += record.not_representative;
    unavailable += record.status == "ok" && !record.energy_j_per_inference;
    ++n;
  }
  EXPECT_EQ(n, 14u);
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(emulated, 1u);
  EXPECT_EQ(unavailable, 1u);
}

}  // namespace
}  // namespace qjoule::report

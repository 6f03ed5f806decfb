// Power traces as `qjoule energy --trace` writes them: measured power, power derived from a
// counter's energy, malformed rows, thinning, and a file that is not a trace.
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/error.h"
#include "qjoule/report/power_trace.h"
#include "sample_results.h"
#include "test_paths.h"

namespace qjoule::report {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

fs::path write_trace_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(ReportPowerTrace, ReadsMeasuredPowerAndDerivesItFromCounters) {
  const auto dir = test::temp_dir("report_trace");
  const auto trace = read_power_trace(write_trace_file(dir / "t.csv", test::report_sample::int8_bs1_trace_csv()));
  ASSERT_EQ(trace.series.size(), 2u);
  EXPECT_EQ(trace.series[0].sensor, "rapl:package-0");
  EXPECT_TRUE(trace.series[0].derived_from_energy);
  ASSERT_EQ(trace.series[0].power_w.size(), 50u);  // one per interval
  EXPECT_NEAR(trace.series[0].power_w[10], test::report_sample::kPackagePowerW, 1e-3);
  EXPECT_EQ(trace.series[1].sensor, "meter:wall");
  EXPECT_FALSE(trace.series[1].derived_from_energy);
  EXPECT_EQ(trace.series[1].power_w.size(), 51u);
  EXPECT_TRUE(trace.notes.empty());
}

TEST(ReportPowerTrace, SkipsMalformedRowsAndThinsLongSeries) {
  const auto dir = test::temp_dir("report_trace_thin");
  std::string text = "time_s,sensor,energy_j,power_w\r\nnot,a,row\n,nvml:gpu0,,5\n";
  for (int i = 0; i < 100; ++i) text += std::to_string(i * 0.1) + ",nvml:gpu0,," + std::to_string(100 + i) + "\n";
  text += "1.0,nvml:gpu1,,\n";
  const auto trace = read_power_trace(write_trace_file(dir / "t.csv", text), 10);
  ASSERT_EQ(trace.series.size(), 1u);
  EXPECT_EQ(trace.series[0].power_w.size(), 10u);
  EXPECT_DOUBLE_EQ(trace.series[0].power_w.front(), 100);
  EXPECT_DOUBLE_EQ(trace.series[0].power_w.back(), 199);
  ASSERT_EQ(trace.notes.size(), 3u);
  EXPECT_THAT(trace.notes[0], HasSubstr("2 malformed row(s)"));
  EXPECT_THAT(trace.notes[1], HasSubstr("nvml:gpu0: 100 readings thinned to 10"));
  EXPECT_THAT(trace.notes[2], HasSubstr("nvml:gpu1: no power readings"));
}

TEST(ReportPowerTrace, AFileThatIsNotATraceFailsNamingIt) {
  const auto dir = test::temp_dir("report_trace_bad");
  const auto path = write_trace_file(dir / "t.csv", "timestamp_s,watts\n0,5\n");
  try {
    read_power_trace(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path.string()));
    EXPECT_THAT(e.what(), HasSubstr("expected the header 'time_s,sensor,energy_j,power_w'"));
  }
  EXPECT_THROW(read_power_trace(dir / "missing.csv"), Error);
}

}  // namespace
}  // namespace qjoule::report

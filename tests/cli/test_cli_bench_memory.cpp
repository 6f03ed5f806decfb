// A run's peak memory is the run's: the same whatever ran before it in the process, and within the
// `--dry-run` prediction. Release builds only (ASan's shadow memory is in every figure).
#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::no_sensors;

using qjoule::test::read_records;
using qjoule::test::run_command;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }

// The record's "peak memory predicted P MiB (...), measured M MiB (D%)" note's D.
double predicted_vs_measured_percent(const nlohmann::json& record) {
  for (const auto& n : record["notes"]) {
    const std::string text = n.get<std::string>();
    if (text.rfind("peak memory predicted ", 0) != 0) continue;
    const auto open = text.rfind('('), close = text.rfind("%)");
    if (open != std::string::npos && close != std::string::npos && close > open)
      return std::stod(text.substr(open + 1, close - open - 1));
  }
  ADD_FAILURE() << "no prediction note in " << record.dump();
  return NAN;
}

TEST(CliBenchMemory, ARunsPeakIsTheSameWhateverRanBeforeItAndWithinThePrediction) {
  QJOULE_REQUIRE_SHARED("models/sst2-distilbert-mini/config.json");
  const auto dir = qjoule::test::temp_dir("cli_bench_memory");
  const std::string bench = no_sensors(dir) + qjoule() + " bench --model " +
                            qjoule::test::shared_data("models/sst2-distilbert-mini").string() +
                            " --batch 32 --seq 128 --threads 2 --idle 0 --warmup 1 --min-time 0.1 --out ";
  const auto alone = run_command(bench + (dir / "alone").string() + " --precisions int8");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const auto after = run_command(bench + (dir / "after").string() + " --precisions fp32,nf4,int8");
  ASSERT_EQ(after.exit_code, 0) << after.output;
  const auto one = read_records(dir / "alone" / "results.jsonl");
  const auto three = read_records(dir / "after" / "results.jsonl");
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(three.size(), 3u);
  ASSERT_EQ(three[2]["precision"], "int8");
  // Left to glibc's dynamic mmap threshold and a block freed on every forward, the int8 run held
  // 10-20 MB more after other runs (126.8 alone, 136.8-146.7 MiB after fp32) here.
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(three[2]["peak_rss_bytes"].get<double>() / mib, one[0]["peak_rss_bytes"].get<double>() / mib, 5.0);
  for (const auto& r : three) EXPECT_LE(std::fabs(predicted_vs_measured_percent(r)), 10.0) << r["run_name"];
  EXPECT_LE(std::fabs(predicted_vs_measured_percent(one[0])), 10.0);
}

}  // namespace

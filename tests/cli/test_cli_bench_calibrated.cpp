// `qjoule bench` with calibrated precisions (--calib): round-to-nearest, GPTQ and AWQ of the trained
// decoder fixture in one sweep over two thread counts. Each calibrated precision is calibrated once
// (OUT/calibrated/ keeps it), its records say how the weights were made (weights_source, calibration_*),
// it runs round-to-nearest's kernels, and a resumed sweep reads the calibration instead of redoing it,
// scoring the same perplexity.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

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
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliBenchCalibrated, EachPrecisionCalibratesOnceAndResumeReadsIt) {
  QJOULE_REQUIRE_SHARED("wikitext2/valid.txt");
  QJOULE_REQUIRE_SHARED("wikitext2/test.txt");
  const auto dir = qjoule::test::temp_dir("cli_bench_calibrated");
  const auto out = dir / "out";
  const std::string command =
      no_sensors(dir) + qjoule::test::qjoule_binary().string() + " bench --model " +
      (qjoule::test::fixtures_dir() / "decoders" / "trained-llama").string() +
      " --precisions int4:g=32,int4:g=32:gptq,int4:g=32:awq --threads 1,2 --seq 8 --decode-tokens 2 --iters 2 "
      "--idle 0 --text " +
      qjoule::test::shared_data("wikitext2/test.txt").string() + " --max-tokens 1500 --calib " +
      qjoule::test::shared_data("wikitext2/valid.txt").string() + " --calib-sequences 32 --calib-tokens 64 --out " +
      out.string() + " 2>&1";
  const auto r = run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(occurrences(r.output, "calibrating int4:g=32:sym:gptq of "), 1u) << r.output;
  EXPECT_EQ(occurrences(r.output, "calibrating int4:g=32:sym:awq of "), 1u) << r.output;
  auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 6u);
  std::map<std::string, nlohmann::json> by_run;
  for (const auto& rec : records) {
    EXPECT_EQ(rec["status"], "ok") << rec["error"];
    by_run[rec["run_name"].get<std::string>()] = rec;
  }
  for (const std::string t : {"1", "2"}) {
    const auto& rtn = by_run.at("trained-llama_cpu_int4_g32_sym_s8_bs1_t" + t);
    const auto& gptq = by_run.at("trained-llama_cpu_int4_g32_sym_gptq_s8_bs1_t" + t);
    const auto& awq = by_run.at("trained-llama_cpu_int4_g32_sym_awq_s8_bs1_t" + t);
    EXPECT_TRUE(rtn["weights_source"].is_null());
    EXPECT_TRUE(rtn["calibration_tokens"].is_null());
    // ", BF16 recording products" between them where this machine's BF16 peak beats its FP32 one.
    EXPECT_THAT(gptq["weights_source"].get<std::string>(),
                AllOf(HasSubstr("calibrated: GPTQ on " + qjoule::test::shared_data("wikitext2/valid.txt").string() +
                                ": 32 sequences × 64 tokens, damp 0.01, "),
                      HasSubstr(", 21 Linears in ")));
    EXPECT_THAT(awq["weights_source"].get<std::string>(), HasSubstr("calibrated: AWQ on "));
    for (const auto* rec : {&gptq, &awq}) {
      EXPECT_EQ((*rec)["calibration_tokens"], 2048);
      EXPECT_GT((*rec)["calibration_seconds"].get<double>(), 0.0);
      EXPECT_EQ((*rec)["kernel_paths"], rtn["kernel_paths"]) << "round-to-nearest's kernels";
      EXPECT_EQ((*rec)["model_bytes"], rtn["model_bytes"]);
      EXPECT_LT((*rec)["lm_kl_mean"].get<double>(), rtn["lm_kl_mean"].get<double>());
    }
    EXPECT_EQ(gptq["calibration_damp"], 0.01);
    EXPECT_TRUE(awq["calibration_damp"].is_null());
  }
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(out / "calibrated")) files += e.path().extension() == ".qjcal";
  EXPECT_EQ(files, 2u);

  // The last two runs lost: --resume reads the calibrations and scores what the first pass scored.
  {
    std::ofstream keep(out / "results.jsonl", std::ios::trunc);
    for (std::size_t i = 0; i < 4; ++i) keep << records[i].dump() << "\n";
  }
  const auto resumed = run_command(command.substr(0, command.size() - 5) + " --resume 2>&1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(occurrences(resumed.output, "calibrating "), 0u) << resumed.output;
  EXPECT_THAT(resumed.output,
              HasSubstr("calibrated weights of int4:g=32:sym:gptq read from " + (out / "calibrated").string()));
  const auto again = read_records(out / "results.jsonl");
  ASSERT_EQ(again.size(), 6u);
  for (std::size_t i = 4; i < 6; ++i) {
    EXPECT_EQ(again[i]["run_name"], records[i]["run_name"]);
    EXPECT_EQ(again[i]["lm_ppl"], records[i]["lm_ppl"]) << again[i]["run_name"];
    EXPECT_EQ(again[i]["weights_source"], records[i]["weights_source"]);
  }
  // Another calibration is another sweep: its records would not compare with these.
  std::string other = command.substr(0, command.size() - 5) + " --resume 2>&1";
  other.replace(other.find("--calib-sequences 32"), 20, "--calib-sequences 4");
  const auto refused = run_command(other);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("this sweep calibrated with --calib {"));
  EXPECT_THAT(refused.output, HasSubstr("resume with the same --calib, --calib-sequences, --calib-tokens and "
                                        "--calib-damp, or choose another --out"));
}

}  // namespace

// A classifier: calibrated on a dataset's first examples (sequences of their own lengths), its records
// saying so, its accuracy and fidelity measured as round-to-nearest's are, with round-to-nearest's kernels.
TEST(CliBenchCalibrated, ClassifierCalibratesOnADataset) {
  const auto dir = qjoule::test::temp_dir("cli_bench_calibrated_encoder");
  const auto out = dir / "out";
  const auto tiny_bert = qjoule::test::fixtures_dir() / "tiny-bert";
  const std::string data = (tiny_bert / "dataset.tsv").string();
  const auto r = run_command(no_sensors(dir) + qjoule::test::qjoule_binary().string() + " bench --model " +
                             tiny_bert.string() + " --dataset " + data +
                             " --precisions int4:g=32,int4:g=32:gptq,int4:g=32:awq --threads 1 --seq 8 --batch 2 "
                             "--iters 2 --idle 0 --calib " +
                             data + " --calib-sequences 8 --out " + out.string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);
  for (const auto& rec : records) {
    EXPECT_EQ(rec["status"], "ok") << rec["error"];
    EXPECT_TRUE(rec["accuracy"].is_number());
    EXPECT_TRUE(rec["fidelity_mean_kl"].is_number());
  }
  EXPECT_TRUE(records[0]["weights_source"].is_null());
  // A classifier's AWQ says how many of its changes the logits kept (model/calibration/awq_classifier_choice.h).
  for (const auto& [i, method] : std::vector<std::pair<std::size_t, std::string>>{{1, "GPTQ on "}, {2, "AWQ ("}}) {
    EXPECT_THAT(records[i]["weights_source"].get<std::string>(),
                AllOf(HasSubstr("calibrated: " + method), HasSubstr(" on " + data + ": 8 sequences of up to")));
    EXPECT_GT(records[i]["calibration_tokens"].get<int64_t>(), 8);
    EXPECT_EQ(records[i]["kernel_paths"], records[0]["kernel_paths"]);
  }
  EXPECT_THAT(records[2]["weights_source"].get<std::string>(),
              HasSubstr(" of 6 changes kept: mean KL to FP32 on the calibration examples "));
}

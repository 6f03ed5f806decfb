// `qjoule bench --task`: every decoder record holds each task's acc / acc_norm as `qjoule score` gives them
// for the same format, and against FP32's answers (computed once per sweep and task, kept in
// OUT/task-base/) Δacc and the share of changed answers; the task table in summary.md; a --resume with
// other tasks refused; and each bad input as one line.
#include <filesystem>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bad_input_case.h"
#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::run_command;
using ::testing::HasSubstr;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
std::string decoder(const std::string& name) { return (qjoule::test::fixtures_dir() / "decoders" / name).string(); }
std::string task(const std::string& name) { return (qjoule::test::fixtures_dir() / "tasks" / name).string(); }

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(CliBenchTask, EveryRunScoresEachTaskAgainstFp32sAnswersComputedOnce) {
  const auto dir = qjoule::test::temp_dir("cli_bench_task");
  const std::string sweep = qjoule::test::no_sensors(dir) + qjoule() + " bench --model " + decoder("tiny-llama") +
                            " --precisions fp32,int8 --seq 8 --decode-tokens 2 --min-time 0.05 --threads 1 --task " +
                            task("tiny_qjoule.jsonl") + " --task " + task("tiny_arc.jsonl") + " --out " +
                            (dir / "out").string();
  const auto r = run_command(sweep + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "FP32 task answers for '" + decoder("tiny-llama") + "' on "), 2u) << "once per task";
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir / "out" / "task-base")) files += e.path().extension() == ".json";
  EXPECT_EQ(files, 2u);

  const auto records = qjoule::test::read_records(dir / "out" / "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  for (const auto& rec : records) {
    ASSERT_TRUE(rec["tasks"].is_object()) << rec.dump();
    const std::string precision = rec["precision"];
    const auto score =
        run_command(qjoule() + " score --model " + decoder("tiny-llama") + " --task " + task("tiny_qjoule.jsonl") +
                    " --task " + task("tiny_arc.jsonl") + " --threads 1 --precision " + precision + " --json " +
                    (dir / (precision + ".json")).string() + " 2>&1");
    ASSERT_EQ(score.exit_code, 0) << score.output;
    nlohmann::json s;
    std::ifstream(dir / (precision + ".json")) >> s;
    for (const auto& t : s["tasks"]) {
      const auto& mine = rec["tasks"][t["task"].get<std::string>()];
      EXPECT_EQ(mine["acc"], t["acc"]) << precision << " " << t["task"];
      EXPECT_EQ(mine["acc_norm"], t["acc_norm"]) << precision << " " << t["task"];
      EXPECT_EQ(mine["items"], t["items"]);
      EXPECT_EQ(mine["hash"], t["hash"]);
      EXPECT_TRUE(mine["reference_unavailable"].is_null());
      if (precision == "fp32") {
        EXPECT_EQ(mine["delta_acc"], 0.0);
        EXPECT_EQ(mine["delta_acc_stderr"], 0.0) << "the same answers item by item: no spread";
        EXPECT_EQ(mine["changed_share"], 0.0);
      }
      // Paired: at most the share of items whose answer changed, over sqrt(items) (d is -1, 0 or 1).
      EXPECT_LE(mine["delta_acc_stderr"].get<double>(),
                std::sqrt(mine["changed_share"].get<double>() / (mine["items"].get<double>() - 1)) + 1e-12);
      EXPECT_NEAR(mine["delta_acc"].get<double>(), mine["acc"].get<double>() - mine["fp32_acc"].get<double>(), 1e-12);
    }
  }
  std::ifstream md(dir / "out" / "summary.md");
  std::stringstream summary_text;
  summary_text << md.rdbuf();
  const std::string summary = summary_text.str();
  EXPECT_THAT(summary, HasSubstr("Task accuracy (`--task`)"));
  EXPECT_THAT(summary, HasSubstr("tiny_arc acc"));
  std::ifstream csv(dir / "out" / "results.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_THAT(header, HasSubstr(",task.tiny_qjoule.items,task.tiny_qjoule.acc,"));
  EXPECT_THAT(header, ::testing::EndsWith(",task.tiny_qjoule.delta_acc_norm,task.tiny_qjoule.changed_share"));
  EXPECT_THAT(header, HasSubstr(",lm_kl_stderr,task.tiny_arc.items,"));
  EXPECT_THAT(header, HasSubstr(",task.tiny_arc.delta_acc,task.tiny_arc.delta_acc_stderr,"));

  // The same --out with another task list: one line naming --task.
  const auto other =
      run_command(qjoule::test::no_sensors(dir) + qjoule() + " bench --model " + decoder("tiny-llama") +
                  " --precisions fp32,int8 --seq 8 --decode-tokens 2 --min-time 0.05 --threads 1 --task " +
                  task("tiny_arc.jsonl") + " --out " + (dir / "out").string() + " --resume 2>&1");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_THAT(other.output, HasSubstr("resume with the same --task and --task-limit"));
}

// FP32 weights that do not fit in the memory available are streamed one layer at a time: the same answers.
TEST(CliBenchTask, AReferenceTooBigForMemoryIsStreamedWithTheSameAnswers) {
  const auto dir = qjoule::test::temp_dir("cli_bench_task_streamed");
  const auto sweep = [&](const std::string& env, const std::string& out) {
    return run_command(qjoule::test::no_sensors(dir) + env + qjoule() + " bench --model " + decoder("tiny-qwen2") +
                       " --precisions fp32 --seq 8 --decode-tokens 2 --min-time 0.05 --threads 1 --task " +
                       task("tiny_hellaswag.jsonl") + " --out " + (dir / out).string() + " 2>&1");
  };
  const auto whole = sweep("", "whole"), streamed = sweep("QJOULE_TEST_STREAM_TASK_REFERENCE=1 ", "streamed");
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
  EXPECT_THAT(whole.output, HasSubstr("loading the model in FP32"));
  EXPECT_THAT(streamed.output, HasSubstr("streamed one layer at a time"));
  const auto a = qjoule::test::read_records(dir / "whole" / "results.jsonl").at(0)["tasks"]["tiny_hellaswag"];
  const auto b = qjoule::test::read_records(dir / "streamed" / "results.jsonl").at(0)["tasks"]["tiny_hellaswag"];
  EXPECT_EQ(a["fp32_acc"], b["fp32_acc"]);
  EXPECT_EQ(a["fp32_acc_norm"], b["fp32_acc_norm"]);
  EXPECT_EQ(b["changed_share"], 0.0) << "the run's FP32 answers are the streamed reference's";
}

class CliBenchTaskBadInput : public ::testing::TestWithParam<qjoule::test::BadInput> {};
TEST_P(CliBenchTaskBadInput, OneLineNamingWhatWasFoundAndExpected) { qjoule::test::expect_one_line_error(GetParam()); }

const auto kOneItem = [](const fs::path& path) {
  qjoule::test::write(path, "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 1}\n");
};

INSTANTIATE_TEST_SUITE_P(
    Flags, CliBenchTaskBadInput,
    ::testing::Values(
        qjoule::test::BadInput{
            "encoder_model", "bench --model TB --precisions fp32 --seq 8 --task DIR/t.jsonl --out DIR/o",
            "--task DIR/t.jsonl: multiple-choice tasks score decoder language models; 'TB' is not one", 1,
            [](const fs::path& dir) { kOneItem(dir / "t.jsonl"); }},
        qjoule::test::BadInput{"limit_without_task",
                               "bench --model TL --precisions fp32 --seq 8 --task-limit 5 --out DIR/o",
                               "--task-limit needs --task FILE"},
        qjoule::test::BadInput{"same_name_twice",
                               "bench --model TL --precisions fp32 --seq 8 --task DIR/a/t.jsonl --task DIR/b/t.jsonl "
                               "--out DIR/o",
                               "--task DIR/b/t.jsonl: its name 't' (the file's stem) is --task DIR/a/t.jsonl's too", 1,
                               [](const fs::path& dir) {
                                 kOneItem(dir / "a" / "t.jsonl");
                                 kOneItem(dir / "b" / "t.jsonl");
                               }},
        qjoule::test::BadInput{"bad_item", "bench --model TL --precisions fp32 --seq 8 --task DIR/t.jsonl --out DIR/o",
                               "DIR/t.jsonl:1: 1 choice in 'choices', expected at least two", 1,
                               [](const fs::path& dir) {
                                 qjoule::test::write(dir / "t.jsonl",
                                                     "{\"context\": \"a\", \"choices\": [\"b\"], \"label\": 0}\n");
                               }}),
    [](const ::testing::TestParamInfo<qjoule::test::BadInput>& case_info) { return case_info.param.name; });

}  // namespace

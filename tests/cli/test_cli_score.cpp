// `qjoule score` end to end on the tiny decoders: the same per-item log-likelihoods (1e-4 relative),
// chosen answers, acc and acc_norm as an independent NumPy scorer written from lm-eval's definitions
// (tools/score_task_reference.py) for the three task shapes, an ARC item cut to the positions as lm-eval
// cuts it, quantized formats through their own kernels, and bad input as one line.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bad_input_case.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

namespace fs = std::filesystem;
using qjoule::test::run_command;
using ::testing::HasSubstr;

constexpr const char* kPython = "/usr/bin/python3";

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path decoder(const std::string& name) { return qjoule::test::fixtures_dir() / "decoders" / name; }
fs::path task(const std::string& name) { return qjoule::test::fixtures_dir() / "tasks" / name; }

bool have_reference_python() {
  static const bool ok =
      fs::exists(kPython) && std::system((std::string(kPython) + " -c 'import numpy, regex' 2>/dev/null").c_str()) == 0;
  return ok;
}

nlohmann::json read_json(const fs::path& path) {
  nlohmann::json j;
  std::ifstream(path) >> j;
  return j;
}

TEST(CliScore, MatchesTheNumpyReferenceItemByItemOnEveryShape) {
  if (!have_reference_python())
    GTEST_SKIP() << kPython << " with numpy and regex is absent (python3-numpy, python3-regex)";
  const auto dir = qjoule::test::temp_dir("cli_score_reference");
  const auto script = qjoule::test::fixtures_dir().parent_path().parent_path() / "tools" / "score_task_reference.py";
  for (const std::string model : {"tiny-llama", "tiny-qwen2", "tiny-gpt2"}) {
    for (const std::string shape : {"qjoule", "hellaswag", "arc"}) {
      const std::string name = model + "_" + shape, file = task("tiny_" + shape + ".jsonl").string();
      const auto ours = run_command(qjoule() + " score --model " + decoder(model).string() + " --task " + file +
                                    " --threads 1 --json " + (dir / (name + ".json")).string() + " 2>&1");
      ASSERT_EQ(ours.exit_code, 0) << ours.output;
      const auto theirs = run_command(std::string(kPython) + " " + script.string() + " " + decoder(model).string() +
                                      " " + file + " " + (dir / (name + ".ref.json")).string() + " 2>&1");
      ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
      const auto a = read_json(dir / (name + ".json"))["tasks"][0], b = read_json(dir / (name + ".ref.json"));
      ASSERT_EQ(a["per_item"].size(), b["per_item"].size()) << name;
      for (std::size_t i = 0; i < a["per_item"].size(); ++i) {
        const auto &x = a["per_item"][i], &y = b["per_item"][i];
        ASSERT_EQ(x["loglik"].size(), y["loglik"].size()) << name << " item " << i;
        for (std::size_t c = 0; c < x["loglik"].size(); ++c) {
          const double p = x["loglik"][c], q = y["loglik"][c];
          EXPECT_NEAR(p, q, 1e-4 * std::fabs(q)) << name << " item " << i << " choice " << c;
        }
        EXPECT_EQ(x["chosen"], y["chosen"]) << name << " item " << i;
        EXPECT_EQ(x["chosen_norm"], y["chosen_norm"]) << name << " item " << i;
        EXPECT_EQ(x["gold"], y["gold"]) << name << " item " << i;
      }
      EXPECT_EQ(a["acc"], b["acc"]) << name;
      EXPECT_EQ(a["acc_norm"], b["acc_norm"]) << name;
      if (shape == "arc" && model == "tiny-gpt2") {
        EXPECT_EQ(a["truncated"], 1) << "its long question is cut";
      }
    }
  }
}

TEST(CliScore, PrintsAccuracyWithItsStandardErrorPerTaskAndRunsTheFormatsKernels) {
  const auto r = run_command(qjoule() + " score --model " + decoder("tiny-llama").string() + " --task " +
                             task("tiny_qjoule.jsonl").string() + " --task " + task("tiny_arc.jsonl").string() +
                             " --task-limit 3 --precision int4:g=32 --threads 1 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("precision  int4:g=32: "));
  EXPECT_THAT(r.output, HasSubstr("int4 ")) << "the format's kernel";
  EXPECT_THAT(r.output, HasSubstr("task       tiny_qjoule (qjoule rows, "));
  EXPECT_THAT(r.output, HasSubstr("3 items of 8 (--task-limit), 2 to 3 choices each"));
  EXPECT_THAT(r.output, HasSubstr("task       tiny_arc (ARC rows, "));
  EXPECT_THAT(r.output, HasSubstr("acc        "));
  EXPECT_THAT(r.output, HasSubstr("acc_norm   "));
  EXPECT_THAT(r.output, HasSubstr(" ± "));
  EXPECT_THAT(r.output, HasSubstr("tokens forwarded"));
}

class CliScoreBadInput : public ::testing::TestWithParam<qjoule::test::BadInput> {};
TEST_P(CliScoreBadInput, OneLineNamingWhatWasFoundAndExpected) { qjoule::test::expect_one_line_error(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Flags, CliScoreBadInput,
    ::testing::Values(
        qjoule::test::BadInput{"missing_task", "score --model TL --task DIR/none.jsonl",
                               "--task DIR/none.jsonl: cannot open the file"},
        qjoule::test::BadInput{"unknown_shape", "score --model TL --task DIR/t.jsonl",
                               "DIR/t.jsonl:1: a task item of unknown shape (found fields: q), expected context", 1,
                               [](const fs::path& dir) { qjoule::test::write(dir / "t.jsonl", "{\"q\": 1}\n"); }},
        qjoule::test::BadInput{"label_out_of_range", "score --model TL --task DIR/t.jsonl",
                               "DIR/t.jsonl:2: label -1 is out of range for 2 choices, expected 0 to 1", 1,
                               [](const fs::path& dir) {
                                 qjoule::test::write(
                                     dir / "t.jsonl",
                                     "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 1}\n"
                                     "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": -1}\n");
                               }},
        qjoule::test::BadInput{"choice_beyond_positions", "score --model TL --task DIR/t.jsonl",
                               "DIR/t.jsonl:1: a choice of", 1,
                               [](const fs::path& dir) {
                                 std::string long_choice;
                                 for (int i = 0; i < 200; ++i) long_choice += "word ";
                                 qjoule::test::write(dir / "t.jsonl", "{\"context\": \"a\", \"choices\": [\"b\", \"" +
                                                                          long_choice + "\"], \"label\": 0}\n");
                               }},
        qjoule::test::BadInput{"task_limit_negative", "score --model TL --task DIR/t.jsonl --task-limit -2",
                               "--task-limit: -2 is out of range, expected 0 (every item) or 1 to"},
        qjoule::test::BadInput{
            "encoder_model", "score --model TB --task DIR/t.jsonl", "is not a supported decoder", 1,
            [](const fs::path& dir) {
              qjoule::test::write(dir / "t.jsonl", "{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"label\": 1}\n");
            }}),
    [](const ::testing::TestParamInfo<qjoule::test::BadInput>& case_info) { return case_info.param.name; });

}  // namespace

namespace {

// --special-tokens: the tokenizer's BOS before every context (tiny-llama's template adds <s>), as lm-eval
// from 0.4.10 encodes by default; the JSON says which ran. (tools/compare_lm_eval.py checks both against
// lm-eval itself.)
TEST(CliScore, SpecialTokensPutTheTokenizersBosBeforeEachContext) {
  const auto dir = qjoule::test::temp_dir("cli_score_special_tokens");
  const auto run = [&](const std::string& flag, const std::string& out) {
    const auto r = run_command(qjoule() + " score --model " + decoder("tiny-llama").string() + " --task " +
                               task("tiny_qjoule.jsonl").string() + " --threads 1 " + flag + " --json " +
                               (dir / out).string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_json(dir / out);
  };
  const auto plain = run("", "plain.json"), bos = run("--special-tokens", "bos.json");
  EXPECT_EQ(plain["special_tokens"], false);
  EXPECT_EQ(bos["special_tokens"], true);
  const auto &a = plain["tasks"][0]["per_item"], &b = bos["tasks"][0]["per_item"];
  ASSERT_EQ(a.size(), b.size());
  bool differ = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["context_tokens"].get<int64_t>(), a[i]["context_tokens"].get<int64_t>() + 1) << "item " << i;
    EXPECT_EQ(b[i]["tokens"], a[i]["tokens"]) << "the same continuation tokens, item " << i;
    differ = differ || b[i]["loglik"] != a[i]["loglik"];
  }
  EXPECT_TRUE(differ) << "conditioned on BOS, the log-likelihoods change";
}

}  // namespace

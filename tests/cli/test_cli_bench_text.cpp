// `qjoule bench --text`: a decoder's perplexity, KL and top-token agreement on a text in every record,
// equal to what `qjoule ppl` prints for the same format, text and windows; the FP32 reference computed
// once per sweep, kept in OUT/kl-base/, reused by --resume and by --kl-base, resumed after a kill -9;
// the decoder table; and each bad input as one line.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

extern char** environ;

namespace {

using qjoule::test::run_command;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
std::string decoder(const std::string& name) { return (qjoule::test::fixtures_dir() / "decoders" / name).string(); }
using qjoule::test::no_sensors;
using qjoule::test::read_records;

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::vector<fs::path> references_in(const fs::path& out) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out / "kl-base", ec))
    if (e.path().extension() == ".qjkl") files.push_back(e.path());
  return files;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A text of ~1,500 tokens for the tiny fixtures, written by the test (no ../shared needed).
fs::path some_text(const fs::path& dir) {
  const auto path = dir / "text.txt";
  std::ofstream out(path);
  for (int i = 0; i < 60; ++i)
    out << "The quick brown fox " << i << " jumps over the lazy dog, and the river runs past the mill " << i * 7
        << " times a day.\n";
  return path;
}

bool relatively_equal(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b)); }

// Every format's record equals `qjoule ppl --kl-base <the sweep's reference> --json` for the same
// format, text and windows: perplexity, its standard error and mean NLL, ΔPPL, the four KL figures,
// the same-top-token rate and RMS Δp. The reference is computed once, and equals a resident FP32 run's.
TEST(CliBenchText, EveryRecordEqualsQjoulePplOnTheSameTextAndWindows) {
  QJOULE_REQUIRE_SHARED("wikitext2/test.txt");
  const auto dir = qjoule::test::temp_dir("cli_bench_text_ppl");
  const auto out = dir / "out";
  const std::string text = qjoule::test::shared_data("wikitext2/test.txt").string();
  const std::string windows = " --text " + text + " --max-tokens 700 --ctx 64 --stride 48 --threads 1";
  const auto r = run_command(
      no_sensors(dir) + qjoule() + " bench --model " + decoder("tiny-llama") +
      " --precisions fp32,bf16,fp16,int8,w8,int4,nf4,nf4:dq --seq 16 --decode-tokens 4 --iters 2 --idle 0 --out " +
      out.string() + windows + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "(computed once per sweep)"), 1u) << r.output;
  const auto refs = references_in(out);
  ASSERT_EQ(refs.size(), 1u);
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 8u);
  for (const auto& rec : records) {
    EXPECT_EQ(rec["schema_version"], 8);
    EXPECT_EQ(rec["engine"], "qjoule");
    ASSERT_EQ(rec["status"], "ok") << rec["error"];
    const std::string precision = rec["precision"];
    const auto json = dir / (precision + ".json");
    const auto p = run_command(qjoule() + " ppl --model " + decoder("tiny-llama") + windows + " --precision " +
                               precision + " --kl-base " + refs[0].string() + " --json " + json.string() + " 2>&1");
    ASSERT_EQ(p.exit_code, 0) << p.output;
    nlohmann::json ppl;
    std::ifstream(json) >> ppl;
    EXPECT_EQ(rec["lm_text"], text);
    EXPECT_EQ(rec["lm_text_tokens"], 700);
    EXPECT_EQ(rec["lm_ctx"], 64);
    EXPECT_EQ(rec["lm_stride"], 48);
    EXPECT_EQ(rec["lm_scored_tokens"], ppl["scored_tokens"]);
    EXPECT_EQ(rec["lm_kl_base"], refs[0].string());
    EXPECT_TRUE(rec["lm_unavailable"].is_null());
    EXPECT_TRUE(rec["fidelity_top1_agreement"].is_null()) << "no pseudo-random fidelity with a text";
    const std::pair<const char*, double> same[] = {
        {"lm_ppl", ppl["ppl"]},
        {"lm_ppl_stderr", ppl["ppl_stderr"]},
        {"lm_nll_mean", ppl["nll_mean"]},
        {"lm_base_ppl", ppl["kl"]["base_ppl"]},
        {"lm_delta_ppl", ppl["kl"]["delta_ppl"]},
        {"lm_delta_ppl_stderr", ppl["kl"]["delta_ppl_stderr"]},
        {"lm_kl_stderr", ppl["kl"]["kl_stderr"]},
        {"lm_kl_mean", ppl["kl"]["mean_kl"]},
        {"lm_kl_median", ppl["kl"]["median_kl"]},
        {"lm_kl_p99", ppl["kl"]["p99_kl"]},
        {"lm_kl_max", ppl["kl"]["max_kl"]},
        {"lm_same_top_rate", ppl["kl"]["top1_agreement"]},
        {"lm_rms_dp", ppl["kl"]["rms_dp"]},
    };
    for (const auto& [key, value] : same)
      EXPECT_PRED2(relatively_equal, rec[key].get<double>(), value) << precision << " " << key;
    if (precision == "fp32") {
      EXPECT_LT(rec["lm_kl_mean"].get<double>(), 1e-5) << "FP16 storage of the reference only";
      EXPECT_EQ(rec["lm_same_top_rate"], 1.0);
    } else if (precision != "fp16") {  // FP16 weights of this tiny model may stay within the FP16 storage's noise
      EXPECT_GT(rec["lm_kl_mean"].get<double>(), 1e-5) << precision;
    }
  }
  // The sweep's reference (weights streamed to FP32 a layer at a time) is the resident FP32 model's:
  // a base saved by `qjoule ppl` gives every format the same figures.
  const auto saved = dir / "ppl_fp32.kl";
  ASSERT_EQ(run_command(qjoule() + " ppl --model " + decoder("tiny-llama") + windows + " --save-kl-base " +
                        saved.string() + " 2>&1")
                .exit_code,
            0);
  const auto a = run_command(qjoule() + " ppl --model " + decoder("tiny-llama") + windows +
                             " --precision int4 --kl-base " + saved.string());
  const auto b = run_command(qjoule() + " ppl --model " + decoder("tiny-llama") + windows +
                             " --precision int4 --kl-base " + refs[0].string());
  const auto kl_line = [](const std::string& s) { return s.substr(s.find("KL ")); };
  EXPECT_EQ(kl_line(a.output), kl_line(b.output));

  // The table and the report are a decoder's.
  EXPECT_THAT(r.output, HasSubstr(" decode tok/s |"));
  EXPECT_THAT(r.output, HasSubstr(" PPL |"));
  EXPECT_THAT(r.output, HasSubstr(" mean KL |"));
  const std::string html = file_bytes(out / "report.html");
  EXPECT_THAT(html, HasSubstr("chart-pareto-decode-speed"));
  EXPECT_THAT(html, HasSubstr("<th>ΔPPL</th>"));
}

// Computed once; a --resume reuses it; a second sweep given it with --kl-base computes none; a sweep
// killed during the reference resumes after its last finished window and ends with the same file.
TEST(CliBenchText, TheReferenceIsComputedOnceResumedAfterAKillAndReusedByKlBase) {
  const auto dir = qjoule::test::temp_dir("cli_bench_text_once");
  const auto text = some_text(dir);
  const std::string common = no_sensors(dir) + qjoule() + " bench --model " + decoder("tiny-qwen2") +
                             " --seq 8 --decode-tokens 2 --iters 1 --warmup 0 --idle 0 --threads 1 --text " +
                             text.string() + " --ctx 32 --stride 16";
  const auto first = run_command(common + " --precisions fp32,int8 --out " + (dir / "a").string() + " 2>&1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(count(first.output, "(computed once per sweep)"), 1u) << first.output;
  EXPECT_THAT(first.output, HasSubstr("FP32 reference: window "));
  const auto refs = references_in(dir / "a");
  ASSERT_EQ(refs.size(), 1u);

  const auto resumed =
      run_command(common + " --precisions fp32,int8,int4 --resume --out " + (dir / "a").string() + " 2>&1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(count(resumed.output, "(computed once per sweep)"), 0u) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("computed before, " + refs[0].string() + " (not computed again)"));
  EXPECT_EQ(read_records(dir / "a" / "results.jsonl").size(), 3u);

  const auto given = run_command(common + " --precisions int4 --kl-base " + refs[0].string() + " --out " +
                                 (dir / "b").string() + " 2>&1");
  ASSERT_EQ(given.exit_code, 0) << given.output;
  EXPECT_EQ(count(given.output, "(computed once per sweep)"), 0u) << given.output;
  EXPECT_THAT(given.output, HasSubstr("--kl-base " + refs[0].string() + " (not computed again)"));
  EXPECT_FALSE(fs::exists(dir / "b" / "kl-base"));
  const auto a = read_records(dir / "a" / "results.jsonl");
  const auto b = read_records(dir / "b" / "results.jsonl");
  EXPECT_EQ(a.back()["lm_kl_mean"], b[0]["lm_kl_mean"]) << "the same int4 run against the same reference";

  // kill -9 during the reference: a longer text, the process killed once its journal lists a window.
  const auto long_text = dir / "long.txt";
  {
    std::ofstream out(long_text);
    for (int i = 0; i < 20; ++i) out << file_bytes(text);
  }
  const auto out = dir / "killed";
  const std::vector<std::string> args = {qjoule(),       "bench",     "--model",         decoder("tiny-qwen2"),
                                         "--seq",        "8",         "--decode-tokens", "2",
                                         "--iters",      "1",         "--idle",          "0",
                                         "--threads",    "1",         "--text",          long_text.string(),
                                         "--max-tokens", "0",         "--ctx",           "32",
                                         "--stride",     "32",        "--precisions",    "fp32",
                                         "--out",        out.string()};
  std::vector<char*> argv;
  for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  const auto journal_lines = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "kl-base", ec))
      if (e.path().string().ends_with(".partial.windows")) return count(file_bytes(e.path()), "\n");
    return std::size_t{0};
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (journal_lines() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the reference finished before it could be killed";
  ASSERT_TRUE(references_in(out).empty()) << "nothing in place before it is finished";

  std::string cmd = no_sensors(dir);
  for (const auto& s : args) cmd += s + " ";
  const auto after_kill = run_command(cmd + "--resume 2>&1");
  ASSERT_EQ(after_kill.exit_code, 0) << after_kill.output;
  EXPECT_THAT(after_kill.output, HasSubstr("; resuming after window "));
  const auto clean_out = dir / "clean";
  std::string clean_cmd = no_sensors(dir);
  for (std::size_t i = 0; i + 1 < args.size(); ++i) clean_cmd += args[i] + " ";
  ASSERT_EQ(run_command(clean_cmd + clean_out.string() + " 2>&1").exit_code, 0);
  const auto killed_refs = references_in(out), clean_refs = references_in(clean_out);
  ASSERT_EQ(killed_refs.size(), 1u);
  ASSERT_EQ(clean_refs.size(), 1u);
  EXPECT_EQ(killed_refs[0].filename(), clean_refs[0].filename());
  EXPECT_TRUE(file_bytes(killed_refs[0]) == file_bytes(clean_refs[0])) << "resumed = computed in one go";
  EXPECT_EQ(read_records(out / "results.jsonl")[0]["lm_ppl"], read_records(clean_out / "results.jsonl")[0]["lm_ppl"]);
}

// Without --text a decoder run keeps the pseudo-random-prompt fidelity, and says why it has no perplexity.
TEST(CliBenchText, WithoutATextTheRecordSaysWhyThereIsNoPerplexity) {
  const auto dir = qjoule::test::temp_dir("cli_bench_text_none");
  const auto r = run_command(no_sensors(dir) + qjoule() + " bench --model " + decoder("tiny-gpt2") +
                             " --precisions int8 --seq 8 --decode-tokens 2 --iters 1 --idle 0 --threads 1 --out " +
                             (dir / "out").string() + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rec = read_records(dir / "out" / "results.jsonl").at(0);
  EXPECT_TRUE(rec["lm_ppl"].is_null());
  EXPECT_THAT(rec["lm_unavailable"].get<std::string>(), HasSubstr("no --text given"));
  EXPECT_EQ(rec["fidelity_examples"], 8);
  EXPECT_THAT(r.output, HasSubstr("agr.: last-token top-1 agreement (and mean KL) with FP32 on pseudo-random prompts"));
}

struct BadText {
  std::string name, args, expected;
};
void PrintTo(const BadText& b, std::ostream* os) { *os << b.name; }
class CliBenchTextBadInput : public ::testing::TestWithParam<BadText> {};

TEST_P(CliBenchTextBadInput, OneLineBeforeAnyRun) {
  const auto& p = GetParam();
  const auto dir = qjoule::test::temp_dir("cli_bench_text_bad_" + p.name);
  some_text(dir);
  std::ofstream(dir / "empty.txt") << " \n\n";
  std::ofstream(dir / "latin1.txt") << "caf\xe9 au lait, encore et encore\n";
  std::ofstream(dir / "short.txt") << "Hello there.\n";
  // A reference of tiny-llama on text.txt, and one of tiny-qwen2 on short text.
  const std::string ppl = qjoule() + " ppl --text " + (dir / "text.txt").string() + " --ctx 32 --stride 16";
  if (p.args.find("DIR/llama.kl") != std::string::npos) {
    ASSERT_EQ(run_command(ppl + " --model " + decoder("tiny-llama") + " --save-kl-base " + (dir / "llama.kl").string())
                  .exit_code,
              0);
  }
  if (p.args.find("DIR/qwen_other.kl") != std::string::npos) {
    std::ofstream(dir / "other.txt") << file_bytes(dir / "text.txt").substr(40);
    ASSERT_EQ(run_command(qjoule() + " ppl --text " + (dir / "other.txt").string() + " --ctx 32 --stride 16 --model " +
                          decoder("tiny-qwen2") + " --save-kl-base " + (dir / "qwen_other.kl").string())
                  .exit_code,
              0);
  }
  std::string args = p.args, expected = p.expected;
  for (std::string::size_type at; (at = args.find("DIR")) != std::string::npos;) args.replace(at, 3, dir.string());
  for (std::string::size_type at; (at = expected.find("DIR")) != std::string::npos;)
    expected.replace(at, 3, dir.string());
  for (std::string::size_type at; (at = args.find("LLAMA")) != std::string::npos;)
    args.replace(at, 5, decoder("tiny-llama"));
  for (std::string::size_type at; (at = args.find("QWEN")) != std::string::npos;)
    args.replace(at, 4, decoder("tiny-qwen2"));
  const auto r =
      run_command(qjoule() + " bench --seq 8 --decode-tokens 2 --out " + (dir / "out").string() + " " + args + " 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("qjoule: error: "));
  EXPECT_THAT(r.output, HasSubstr(expected));
  EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl")) << "nothing ran";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBenchTextBadInput,
    ::testing::Values(
        BadText{"encoder", "--model " + (qjoule::test::fixtures_dir() / "tiny-bert").string() + " --text DIR/text.txt",
                "is not a decoder language model; --text scores decoders"},
        BadText{"empty", "--model LLAMA --text DIR/empty.txt", "DIR/empty.txt: the text is empty"},
        BadText{"not_utf8", "--model LLAMA --text DIR/latin1.txt", "latin1.txt: invalid UTF-8 at byte offset 3"},
        BadText{"missing", "--model LLAMA --text DIR/nowhere.txt", "--text DIR/nowhere.txt: cannot open the file"},
        BadText{"folder", "--model LLAMA --text DIR", "--text DIR: is a folder, expected a UTF-8 text file"},
        BadText{"max_tokens_one", "--model LLAMA --text DIR/text.txt --max-tokens 1",
                "--max-tokens: 1 is out of range, expected 0 (the whole text) or 2 to"},
        BadText{"shorter_than_a_window", "--model LLAMA --text DIR/short.txt --ctx 64",
                "shorter than one window of --ctx 64 tokens"},
        BadText{"ctx_beyond_positions", "--model LLAMA --text DIR/text.txt --ctx 4096", "--ctx 4096 is beyond model"},
        BadText{"kl_base_of_another_model", "--model QWEN --text DIR/text.txt --ctx 32 --kl-base DIR/llama.kl",
                "--kl-base DIR/llama.kl: computed for model identity"},
        BadText{"kl_base_of_another_text", "--model QWEN --text DIR/text.txt --ctx 32 --kl-base DIR/qwen_other.kl",
                "--kl-base DIR/qwen_other.kl: written over"},
        BadText{"kl_base_of_other_windows",
                "--model LLAMA --text DIR/text.txt --ctx 32 --stride 8 --kl-base DIR/llama.kl",
                "written with --ctx 32 --stride 16, but this sweep uses --ctx 32 --stride 8"},
        BadText{"kl_base_not_a_base", "--model LLAMA --text DIR/text.txt --kl-base DIR/text.txt",
                "not a qjoule KL base"},
        BadText{"ctx_without_text", "--model LLAMA --ctx 32", "--ctx needs --text FILE"},
        BadText{"kl_base_without_text", "--model LLAMA --kl-base DIR/text.txt", "--kl-base needs --text FILE"},
        BadText{"ppl_increase_negative", "--model LLAMA --text DIR/text.txt --max-ppl-increase -1",
                "--max-ppl-increase: -1 is out of range"}),
    [](const ::testing::TestParamInfo<BadText>& case_info) { return case_info.param.name; });

}  // namespace

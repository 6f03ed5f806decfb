// `qjoule bench` end to end on the tiny BERT fixture (and the SST-2 model when ../shared is there):
// records, projections, a sweep killed with SIGKILL and resumed, and bad input.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qjoule/kernels/cuda_device.h"
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
fs::path tiny_bert() { return qjoule::test::fixtures_dir() / "tiny-bert"; }
fs::path tiny_decoder(const std::string& name) { return qjoule::test::fixtures_dir() / "decoders" / name; }
using qjoule::test::no_sensors;
using qjoule::test::read_records;

std::size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST(CliBench, TinyBertSweepWritesRecordsCsvAndTable) {
  const auto dir = qjoule::test::temp_dir("cli_bench_tiny");
  const auto out = dir / "out";
  const auto r = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() + " --dataset " +
                             (tiny_bert() / "dataset.tsv").string() +
                             " --precisions fp32,int8,bf16 --batch 2,4 --seq 16 --threads 1 --min-time 0.05 --out " +
                             out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 6u);
  EXPECT_EQ(records[0]["run_name"], "tiny-bert_cpu_fp32_s16_bs2_t1");
  EXPECT_EQ(records[1]["run_name"], "tiny-bert_cpu_int8_w8a8_s16_bs2_t1");
  for (const auto& rec : records) {
    EXPECT_EQ(rec["schema_version"], 8);
    EXPECT_TRUE(rec["decode_tokens"].is_null()) << "an encoder run has no decode phase";
    EXPECT_EQ(rec["status"], "ok");
    EXPECT_EQ(rec["accuracy_labelled"], 12);
    EXPECT_GE(rec["latency_count"].get<int>(), 3);
    EXPECT_TRUE(rec["energy_j"].is_null()) << "no sensor: never a number";
    EXPECT_THAT(rec["energy_unavailable"].get<std::string>(), HasSubstr("rapl"));
    EXPECT_FALSE(rec["kernel_paths"].empty());
    EXPECT_GT(rec["model_bytes"].get<double>(), 0);
    EXPECT_FALSE(rec["environment"]["cpu"].is_null());
  }
  EXPECT_EQ(records[0]["accuracy_correct"], 4) << "PyTorch's 4/12 on the fixture";
  EXPECT_EQ(records[0]["fidelity_top1_agreement"], 1.0);
  std::ifstream csv(out / "results.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("schema_version,run_name,", 0), 0u) << header;
  EXPECT_EQ(count_lines(out / "results.csv"), 7u);
  EXPECT_THAT(r.output, HasSubstr("| run"));
  EXPECT_THAT(r.output, HasSubstr("baseline"));
  EXPECT_THAT(r.output, HasSubstr("[6/6] tiny-bert_cpu_bf16_s16_bs4_t1"));
  EXPECT_THAT(r.output, HasSubstr("n/a [1]"));
  std::ifstream md(out / "summary.md");
  std::stringstream summary;
  summary << md.rdbuf();
  EXPECT_THAT(summary.str(), HasSubstr("# qjoule bench"));
  EXPECT_THAT(summary.str(), HasSubstr("tiny-bert_cpu_int8_w8a8_s16_bs4_t1"));
  EXPECT_THAT(summary.str(), HasSubstr("n/a [1] energy unavailable: "));
  EXPECT_TRUE(fs::exists(out / "report.html")) << "needs Debian's libjs-chart.js (scripts/install-deps.sh)";

  // The same sweep again without --resume would mix two sweeps: refused, file untouched.
  const auto again = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                                 " --precisions fp32 --seq 16 --out " + out.string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output, HasSubstr("already holds results; pass --resume"));
  EXPECT_EQ(count_lines(out / "results.jsonl"), 6u);
}

// Two benches on one --out at the same time: the second gets one line naming the first (the results
// file is locked for a bench's whole run), and every configuration is recorded exactly once.
TEST(CliBench, ConcurrentResumesOnOneOutRecordEachRunOnce) {
  const auto dir = qjoule::test::temp_dir("cli_bench_concurrent");
  const auto out = dir / "out";
  const std::string bench = no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                            " --precisions fp32,int8,bf16 --batch 1 --seq 8 --threads 1 --min-time 0.4 --idle 0 "
                            "--resume --out " +
                            out.string();
  const auto r = run_command("sh -c '" + bench + " > " + (dir / "a.log").string() + " 2>&1 & " + bench + "; wait'");
  std::stringstream a_log;
  a_log << std::ifstream(dir / "a.log").rdbuf();
  const std::string both = r.output + a_log.str();
  EXPECT_THAT(both, HasSubstr("results.jsonl' is in use by another qjoule bench (pid "));
  const auto records = read_records(out / "results.jsonl");
  std::set<std::string> names;
  for (const auto& rec : records) names.insert(rec["run_name"].get<std::string>());
  EXPECT_EQ(records.size(), 3u) << both;
  EXPECT_EQ(names.size(), 3u) << both;
}

// --resume onto another model's results: one line saying which models differ; nothing appended.
TEST(CliBench, ResumingAnotherModelsSweepIsRefused) {
  const auto dir = qjoule::test::temp_dir("cli_bench_other_model");
  const auto out = dir / "out";
  const std::string common = no_sensors(dir) + qjoule() +
                             " bench --precisions fp32 --seq 8 --threads 1 --iters 3 "
                             "--idle 0 --out " +
                             out.string();
  ASSERT_EQ(run_command(common + " --model " + tiny_bert().string()).exit_code, 0);
  const auto r = run_command(common + " --resume --model " + tiny_decoder("tiny-llama").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sweep-identity.json: this sweep measured model(s)"));
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(count_lines(out / "results.jsonl"), 2u) << "tiny-bert's two batch sizes, nothing more";
}

TEST(CliBench, KilledSweepResumesWithEveryRunExactlyOnce) {
  const auto dir = qjoule::test::temp_dir("cli_bench_kill");
  const auto out = dir / "out";
  const std::vector<std::string> args = {qjoule(),       "bench",
                                         "--model",      tiny_bert().string(),
                                         "--precisions", "fp32,int8,bf16,fp16,w8",
                                         "--batch",      "1,2,4",
                                         "--seq",        "8,16",
                                         "--threads",    "1",
                                         "--min-time",   "0.15",
                                         "--out",        out.string()};
  const std::size_t expected = 5 * 3 * 2;
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  ASSERT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  // Kill it once a few runs are recorded, in the middle of a later one.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(out / "results.jsonl") < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(70));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  const std::size_t before = count_lines(out / "results.jsonl");
  ASSERT_GE(before, 3u);
  ASSERT_LT(before, expected) << "the sweep finished before it could be killed";

  std::string cmd;
  for (const auto& a : args) cmd += a + " ";
  const auto resumed = run_command(cmd + "--resume");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resume: " + std::to_string(before) + " of 30 runs already in"));
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), expected);
  std::map<std::string, int> seen;
  for (const auto& rec : records) ++seen[rec["run_name"].get<std::string>()];
  EXPECT_EQ(seen.size(), expected);
  for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(count_lines(out / "results.csv"), expected + 1);

  // Resuming a finished sweep runs nothing and rewrites the same projections.
  const auto again = run_command(cmd + "--resume");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(count_lines(out / "results.jsonl"), expected);
}

struct BadBench {
  std::string name;
  std::string args;
  std::string expected;
};
void PrintTo(const BadBench& b, std::ostream* os) { *os << b.name; }

class CliBenchBadInput : public ::testing::TestWithParam<BadBench> {};

TEST_P(CliBenchBadInput, OneClearLineAndNothingWritten) {
  const auto& p = GetParam();
  const auto dir = qjoule::test::temp_dir("cli_bench_bad_" + p.name);
  std::ofstream(dir / "sweep.json") << R"({"defaults": {"seq": 16}, "sweep": {"precision": ["fp32"]}, "repeat": 3})";
  std::ofstream(dir / "file") << "a regular file";
  std::string args = p.args;
  for (std::string::size_type at; (at = args.find("DIR")) != std::string::npos;) args.replace(at, 3, dir.string());
  const auto r = run_command(qjoule() + " bench --model " + tiny_bert().string() + " " + args);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(p.expected)) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl")) << "nothing half-written";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBenchBadInput,
    ::testing::Values(
        BadBench{"unknown_precision", "--precisions fp32,int3 --seq 16 --out DIR/out",
                 "precision 'int3': unknown format 'int3'"},
        BadBench{"batch_zero", "--batch 0 --seq 16 --out DIR/out", "--batch 0: expected at least 1"},
        BadBench{"seq_beyond_positions", "--seq 64 --out DIR/out", "sequence length 64 is outside what model"},
        BadBench{"sweep_unknown_key", "--sweep DIR/sweep.json --out DIR/out", "repeat"},
        BadBench{"unwritable_out", "--seq 16 --out DIR/file/out", "is not writable"},
        BadBench{"resume_without_out", "--seq 16 --resume", "--resume needs --out DIR"},
        BadBench{"unknown_device", "--device tpu --seq 16 --out DIR/out", "--device tpu: expected cpu, cuda or cuda:N"},
        BadBench{"batch_negative", "--batch -1 --seq 16 --out DIR/out", "--batch '-1': '-1' is not a positive integer"},
        BadBench{"threads_huge", "--threads 1,100000 --seq 16 --out DIR/out",
                 "100000 threads is out of range, expected 1 to 1024"},
        BadBench{"warmup_negative", "--warmup -1 --seq 16 --out DIR/out",
                 "--warmup: -1 is out of range, expected 0 to 1000000"},
        BadBench{"iters_zero", "--iters 0 --seq 16 --out DIR/out",
                 "--iters: 0 is out of range, expected 1 to 1000000000"},
        BadBench{"cooldown_negative", "--cooldown -1 --seq 16 --out DIR/out",
                 "--cooldown: -1 is out of range, expected 0 to 3600"},
        BadBench{"idle_negative", "--idle -1 --seq 16 --out DIR/out", "--idle: -1 is out of range, expected 0 to 3600"},
        BadBench{"min_time_text", "--min-time soon --seq 16 --out DIR/out",
                 "--min-time: 'soon' is not a number, expected 0 to 86400"},
        BadBench{"decode_windows_zero", "--decode-windows 0 --seq 16 --out DIR/out",
                 "--decode-windows: 0 is out of range, expected 1 to 100"},
        BadBench{"decode_windows_text", "--decode-windows many --seq 16 --out DIR/out",
                 "--decode-windows: 'many' is not a number, expected 1 to 100"},
        BadBench{"interval_zero", "--interval 0 --seq 16 --out DIR/out",
                 "--interval: 0 is out of range, expected more than 0 and at most 60000"},
        BadBench{"accuracy_drop_negative", "--max-accuracy-drop -2 --seq 16 --out DIR/out",
                 "--max-accuracy-drop: -2 is out of range, expected 0 to 100"},
        BadBench{"decode_tokens_negative", "--decode-tokens -1 --seq 16 --out DIR/out",
                 "--decode-tokens: -1 is out of range, expected 1 to 1000000"}),
    [](const ::testing::TestParamInfo<BadBench>& case_info) { return case_info.param.name; });

// `--device cuda`: without a usable GPU (or the CUDA backend), one line with the reason before any run,
// exit 1; with one, the runs are on the GPU (latency from CUDA events, said in the record's notes).
TEST(CliBench, DeviceCudaRunsOnTheGpuOrSaysWhyNot) {
#if defined(__SANITIZE_ADDRESS__)
  // Where a driver is present, the CUDA runtime's allocations read as leaks under LeakSanitizer.
  GTEST_SKIP() << "--device cuda is checked in release builds";
#endif
  const auto& status = qjoule::kernels::cuda_device_status();
  const auto dir = qjoule::test::temp_dir("cli_bench_cuda");
  const std::string base = no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                           " --seq 16 --batch 2 --iters 3 --threads 1 --idle 0 --out " + (dir / "out").string();
  if (!status.usable) {
    for (const std::string device : {"cuda", "cuda:0"}) {
      const auto r = run_command(base + " --device " + device + " --precisions fp32,int8");
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_THAT(r.output, HasSubstr("--device " + device + ": " + status.reason)) << r.output;
      EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
      EXPECT_FALSE(fs::exists(dir / "out" / "results.jsonl")) << "nothing half-written";
    }
    return;
  }
  const auto r = run_command(base + " --device cuda --precisions fp32,int8,fp16,int4:g32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(dir / "out" / "results.jsonl");
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0]["run_name"], "tiny-bert_cuda_fp32_s16_bs2_t1");
  for (const auto& rec : records) {
    EXPECT_EQ(rec["status"], "ok") << rec["error"];
    EXPECT_EQ(rec["iters"], 3);
    EXPECT_GT(rec["latency_p50_ms"].get<double>(), 0.0) << rec;
    EXPECT_THAT(rec["notes"].dump(), HasSubstr("latency: CUDA events on GPU 0"));
    EXPECT_THAT(rec["kernel_paths"].dump(), HasSubstr("cublaslt"));
    // No NVML here (no_sensors): the GPU run's energy is unavailable, with the reason, never the CPU's.
    EXPECT_TRUE(rec["energy_j"].is_null());
    EXPECT_THAT(rec["energy_unavailable"].get<std::string>(), HasSubstr("GPU 0"));
  }
  EXPECT_EQ(records[0]["fidelity_top1_agreement"], 1.0);
  // SmoothQuant and a format without a CUDA kernel are refused before any run, in one line.
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--precisions int8:sq0.5", "SmoothQuant runs on the CPU only"},
           {"--precisions w8", "precision 'w8' (INT8 weight-only) has no CUDA kernel"}}) {
    const auto bad = run_command(base + "2 --device cuda " + args);
    EXPECT_EQ(bad.exit_code, 1) << bad.output;
    EXPECT_THAT(bad.output, HasSubstr(expected));
  }
  const auto decoder =
      run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_decoder("tiny-llama").string() +
                  " --device cuda --seq 8 --out " + (dir / "dec").string());
  EXPECT_EQ(decoder.exit_code, 0) << decoder.output;  // the decoder graph on the CUDA backend
}

TEST(CliBench, DecoderPrefillAndDecodeThroughputPerPhase) {
  const auto dir = qjoule::test::temp_dir("cli_bench_decoder");
  const auto out = dir / "out";
  // No --batch: a decoder model gets batch 1 (not the encoders' default 1,8).
  const auto r = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_decoder("tiny-llama").string() +
                             " --precisions fp32,int8 --seq 16 --decode-tokens 8 --iters 3 --threads 1 --idle 0 "
                             "--out " +
                             out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["run_name"], "tiny-llama_cpu_fp32_s16_bs1_t1");
  EXPECT_EQ(records[1]["run_name"], "tiny-llama_cpu_int8_w8a8_s16_bs1_t1");
  for (const auto& rec : records) {
    EXPECT_EQ(rec["schema_version"], 8);
    EXPECT_EQ(rec["status"], "ok") << rec["error"];
    EXPECT_EQ(rec["batch"], 1);
    EXPECT_EQ(rec["prefill_tokens"], 16);
    EXPECT_EQ(rec["decode_tokens"], 8);
    EXPECT_EQ(rec["iters"], 3);
    EXPECT_EQ(rec["decode_iters"], 3);
    EXPECT_GT(rec["prefill_tokens_per_s_mean"].get<double>(), 0.0);
    EXPECT_GE(rec["prefill_tokens_per_s_std"].get<double>(), 0.0);
    EXPECT_GT(rec["decode_tokens_per_s_mean"].get<double>(), 0.0);
    EXPECT_GE(rec["decode_tokens_per_s_std"].get<double>(), 0.0);
    EXPECT_GT(rec["decode_ms_per_token_mean"].get<double>(), 0.0);
    EXPECT_GT(rec["tokens_per_s"].get<double>(), 0.0);
    // No sensor: null with the reason, for each phase; never 0.
    for (const char* key : {"energy_j", "prefill_mj_per_token", "decode_energy_j", "decode_mj_per_token"})
      EXPECT_TRUE(rec[key].is_null()) << key;
    EXPECT_THAT(rec["energy_unavailable"].get<std::string>(), HasSubstr("rapl"));
    EXPECT_THAT(rec["decode_energy_unavailable"].get<std::string>(), HasSubstr("rapl"));
    EXPECT_TRUE(rec["accuracy"].is_null());
    EXPECT_EQ(rec["fidelity_examples"], 8);
  }
  EXPECT_EQ(records[0]["fidelity_top1_agreement"], 1.0);
  EXPECT_THAT(r.output, HasSubstr("decoder model: each run times the prefill of --seq prompt tokens and 8 greedy"));
  // The first run's line is cut by the FP32 reference's two lines (said once per model and seq).
  EXPECT_THAT(r.output, HasSubstr("[1/2] tiny-llama_cpu_fp32_s16_bs1_t1 ...\nFP32 reference for '"));
  EXPECT_THAT(r.output, HasSubstr("[2/2] tiny-llama_cpu_int8_w8a8_s16_bs1_t1 ... prefill 16 tokens: "));
  EXPECT_THAT(r.output, HasSubstr("decode 8 tokens: "));
  EXPECT_THAT(r.output, HasSubstr("| decode tok/s |"));
  std::ifstream csv(out / "results.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_THAT(header, HasSubstr(",decode_tokens_per_s_mean,"));
  EXPECT_TRUE(fs::exists(out / "report.html"));

  // Resumed with another --decode-tokens: the recorded runs are kept, and the bench says so.
  const auto resumed =
      run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_decoder("tiny-llama").string() +
                  " --precisions fp32,int8 --seq 16 --decode-tokens 4 --iters 3 --threads 1 --idle 0 "
                  "--resume --out " +
                  out.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("holds decoder runs with 8 decode tokens"));
  EXPECT_EQ(count_lines(out / "results.jsonl"), 2u);
}

TEST(CliBench, DecoderEnergyEstimateGivesMillijoulesPerTokenPerPhase) {
  const auto dir = qjoule::test::temp_dir("cli_bench_decoder_estimate");
  const auto out = dir / "out";
  const auto r = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_decoder("tiny-gpt2").string() +
                             " --precisions fp32 --seq 8 --decode-tokens 4 --min-time 0.05 --threads 1 --idle 0 "
                             "--energy-estimate cpu-tdp=65 --out " +
                             out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(out / "results.jsonl");
  ASSERT_EQ(records.size(), 1u);
  const auto& rec = records[0];
  EXPECT_GT(rec["prefill_mj_per_token"].get<double>(), 0.0);
  EXPECT_GT(rec["decode_mj_per_token"].get<double>(), 0.0);
  EXPECT_EQ(rec["prefill_mj_per_token"], rec["energy_mj_per_token"]);
  EXPECT_TRUE(rec["decode_energy_unavailable"].is_null());
  EXPECT_THAT(rec["energy_method"].get<std::string>(), HasSubstr("estimated"));
  EXPECT_TRUE(rec["decode_energy_window"].is_object());
  EXPECT_NEAR(rec["decode_mj_per_token"].get<double>(),
              rec["decode_energy_j"].get<double>() * 1e3 / (rec["decode_iters"].get<double>() * 4), 1e-9);
}

TEST(CliBench, DecoderRunsRefuseWhatTheyCannotMeasure) {
  const auto dir = qjoule::test::temp_dir("cli_bench_decoder_bad");
  const std::string model = " bench --model " + tiny_decoder("tiny-llama").string();
  const auto batched = run_command(qjoule() + model + " --batch 1,4 --seq 16 --out " + (dir / "a").string());
  EXPECT_EQ(batched.exit_code, 1) << batched.output;
  EXPECT_THAT(batched.output, HasSubstr("run tiny-llama_cpu_fp32_s16_bs4_t"));
  EXPECT_THAT(batched.output, HasSubstr("batch 4 with decoder model"));
  EXPECT_LE(std::count(batched.output.begin(), batched.output.end(), '\n'), 1) << batched.output;
  const auto too_long = run_command(qjoule() + model + " --seq 100 --decode-tokens 64 --out " + (dir / "b").string());
  EXPECT_EQ(too_long.exit_code, 1) << too_long.output;
  EXPECT_THAT(too_long.output, HasSubstr("100 prompt tokens (seq) + 64 decode tokens (--decode-tokens) = 164 is more "
                                         "than the 128 positions"));
  const auto zero = run_command(qjoule() + model + " --seq 16 --decode-tokens 0 --out " + (dir / "c").string());
  EXPECT_EQ(zero.exit_code, 1) << zero.output;
  EXPECT_THAT(zero.output, HasSubstr("--decode-tokens: 0 is out of range, expected 1 to 1000000"));
  for (const char* sub : {"a", "b", "c"}) EXPECT_FALSE(fs::exists(dir / sub / "results.jsonl")) << sub;
}

// --dry-run runs nothing: one line per run with its predicted peak memory and whether it fits, decoders
// and encoders alike; no results folder is made.
TEST(CliBench, DryRunPredictsPeakMemoryPerRunAndRunsNothing) {
  const auto dir = qjoule::test::temp_dir("cli_bench_dry_run");
  const auto r = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_decoder("tiny-llama").string() +
                             " --precisions fp32,int4 --seq 8 --threads 1 --dry-run --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dry run: nothing runs"));
  EXPECT_THAT(r.output, HasSubstr("exact model bytes + sized buffers"));
  EXPECT_THAT(r.output, HasSubstr("peak MiB"));
  EXPECT_THAT(r.output, HasSubstr("tiny-llama_cpu_fp32_s8_bs1_t1"));
  EXPECT_THAT(r.output, HasSubstr("tiny-llama_cpu_int4_g128_sym_s8_bs1_t1"));
  EXPECT_FALSE(fs::exists(dir / "out"));
  const auto encoder = run_command(no_sensors(dir) + qjoule() + " bench --model " + tiny_bert().string() +
                                   " --precisions fp32 --batch 1 --seq 8 --threads 1 --dry-run");
  ASSERT_EQ(encoder.exit_code, 0) << encoder.output;
  EXPECT_THAT(encoder.output,
              ::testing::ContainsRegex("tiny-bert_cpu_fp32_s8_bs1_t1 +[0-9]+ +[0-9]+ +[0-9]+ +(yes|unknown)"));
  EXPECT_THAT(encoder.output, ::testing::Not(HasSubstr("unavailable")));
}

TEST(CliBench, HelpTeaches) {
  const auto r = run_command(qjoule() + " bench --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* text : {"--precisions", "--batch", "--seq", "--threads", "--resume", "--sweep", "--out",
                           "--max-accuracy-drop", "--min-time", "--idle", "Examples", "fp32,bf16,int8,w8,int4,nf4",
                           "--decode-tokens", "decoder model", "--dry-run"})
    EXPECT_THAT(r.output, HasSubstr(text));
}

TEST(CliBench, Sst2DistilBertMiniAccuracyAndDeltas) {
  QJOULE_REQUIRE_SHARED("models/sst2-distilbert-mini/config.json");
  const auto dir = qjoule::test::temp_dir("cli_bench_sst2");
  const auto r =
      run_command(no_sensors(dir) + qjoule() + " bench --model " +
                  qjoule::test::shared_data("models/sst2-distilbert-mini").string() + " --dataset " +
                  qjoule::test::shared_data("sst2/dev.tsv").string() +
                  " --precisions fp32,int8,nf4 --batch 32 --seq 128 --min-time 0.2 --out " + (dir / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = read_records(dir / "out" / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["precision"], "fp32");
  EXPECT_EQ(records[0]["accuracy_correct"], 717);
  EXPECT_EQ(records[0]["accuracy_labelled"], 872);
  EXPECT_THAT(r.output, HasSubstr("82.22%"));
  EXPECT_GE(records[1]["accuracy"].get<double>(), 0.8222 - 0.01);
  EXPECT_GE(records[2]["fidelity_top1_agreement"].get<double>(), 0.95);
  std::printf("%s\n", r.output.c_str());
}

}  // namespace

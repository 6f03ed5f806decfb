// The decoder architectures checked against Hugging Face transformers itself
// (tools/make_hf_decoder_fixtures.py: tiny-qwen3, tiny-gemma3, tiny-phi3, tiny-llama32), through every command that takes a decoder,
// as a user runs them: ppl in every CPU format (and calibrated int4), generate, score, bench, and export
// (GPTQ safetensors read back, GGUF where llama.cpp reads the configuration as transformers does).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fixture_param_name.h"
#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::decoder_fixture_dir;
using qjoule::test::run_command;
using qjoule::test::write_sample_text;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
std::string task() { return (qjoule::test::fixtures_dir() / "tasks" / "tiny_qjoule.jsonl").string(); }

class DecoderArchitecture : public ::testing::TestWithParam<std::string> {};

// The checkpoint's block Linears: 7 a layer (Phi-3: 4, its q/k/v and gate/up each one tensor).
int block_linears(const std::string& fixture) {
  return fixture == "tiny-gemma3" ? 3 * 7 : fixture == "tiny-phi3" ? 2 * 4 : 2 * 7;
}

TEST_P(DecoderArchitecture, PplRunsInEveryCpuFormatAndCalibrated) {
  const auto dir = qjoule::test::temp_dir("cli_arch_ppl_" + GetParam());
  const std::string common = qjoule() + " ppl --model " + decoder_fixture_dir(GetParam()) + " --text " +
                             write_sample_text(dir).string() + " --ctx 64 --stride 32 --threads 1";
  const auto base = run_command(common + " --save-kl-base " + (dir / "fp32.kl").string() + " 2>&1");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  for (const std::string p : {"bf16", "fp16", "int8", "w8", "int4:g=32", "int4:g=32:asym:a8", "nf4", "nf4:dq"}) {
    const auto r = run_command(common + " --precision " + p + " --kl-base " + (dir / "fp32.kl").string() + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << p << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("ΔPPL")) << p;
    EXPECT_THAT(r.output, HasSubstr(" ×" + std::to_string(block_linears(GetParam()))))
        << p << ": every block Linear in it";
  }
  for (const std::string p : {"int4:g=32:gptq", "int4:g=32:awq"}) {
    const auto r = run_command(common + " --precision " + p + " --calib " + write_sample_text(dir).string() +
                               " --calib-sequences 4 --calib-tokens 32 2>&1");
    ASSERT_EQ(r.exit_code, 0) << p << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("perplexity ")) << p;
  }
}

TEST_P(DecoderArchitecture, GenerateScoreAndBenchRunIt) {
  const auto dir = qjoule::test::temp_dir("cli_arch_run_" + GetParam());
  const auto gen = run_command(qjoule() + " generate --model " + decoder_fixture_dir(GetParam()) +
                               " --prompt 'The quick brown fox' --max-new 8 --precision int4:g=32 --threads 1 2>&1");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  EXPECT_THAT(gen.output, HasSubstr("decode"));
  const auto score = run_command(qjoule() + " score --model " + decoder_fixture_dir(GetParam()) + " --task " + task() +
                                 " --precision nf4 --threads 1 2>&1");
  ASSERT_EQ(score.exit_code, 0) << score.output;
  EXPECT_THAT(score.output, HasSubstr("acc"));
  const auto bench =
      run_command(qjoule::test::no_sensors(dir) + qjoule() + " bench --model " + decoder_fixture_dir(GetParam()) +
                  " --precisions fp32,int8,int4:g=32 --seq 8 --decode-tokens 4 --threads 1 --warmup 0"
                  " --iters 1 --min-time 0 --idle 0 --out " +
                  (dir / "bench").string() + " 2>&1");
  ASSERT_EQ(bench.exit_code, 0) << bench.output;
  const auto records = qjoule::test::read_records(dir / "bench" / "results.jsonl");
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) {
    EXPECT_EQ(r["status"], "ok") << r["error"];
    EXPECT_GT(r["decode_tokens_per_s_mean"].get<double>(), 0.0);
  }
}

TEST_P(DecoderArchitecture, ExportsGptqThatReadsBackAndGguf) {
  const auto dir = qjoule::test::temp_dir("cli_arch_export_" + GetParam());
  const auto gptq = run_command(qjoule() + " export --model " + decoder_fixture_dir(GetParam()) +
                                " --precision int4:g=32:sym --out " + (dir / "gptq").string() + " 2>&1");
  ASSERT_EQ(gptq.exit_code, 0) << gptq.output;
  const auto back =
      run_command(qjoule() + " ppl --model " + (dir / "gptq").string() + " --text " + write_sample_text(dir).string() +
                  " --precision int4:g=32:sym --ctx 64 --threads 1 2>&1");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  const auto gguf = run_command(qjoule() + " export --model " + decoder_fixture_dir(GetParam()) +
                                " --precision int4:g=32:sym --to gguf --out " + (dir / "m.gguf").string() + " 2>&1");
  if (GetParam() == "tiny-gemma3") {  // its query_pre_attn_scalar (24, head_dim 32) is not llama.cpp's: one line
    EXPECT_NE(gguf.exit_code, 0);
    EXPECT_THAT(gguf.output, HasSubstr("llama.cpp's gemma3 by 1/sqrt(head_dim = 32)"));
    EXPECT_FALSE(fs::exists(dir / "m.gguf"));
    return;
  }
  ASSERT_EQ(gguf.exit_code, 0) << gguf.output;
  EXPECT_TRUE(fs::exists(dir / "m.gguf"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DecoderArchitecture,
                         ::testing::Values("tiny-qwen3", "tiny-gemma3", "tiny-phi3", "tiny-llama32"),
                         qjoule::test::FixtureParamName());

}  // namespace

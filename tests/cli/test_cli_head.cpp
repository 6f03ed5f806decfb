// The head as deployed: a decoder's lm_head (or tied embeddings as the head) is held in the checkpoint's
// 16-bit type below FP32, FP32 for an FP32 run or an F32 checkpoint, quantized where --layer-precision
// names it, FP32 where --quant-exclude names it; the console's head line and the records' head_format
// and head_bytes say which, and model_bytes counts it as held.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

// tiny-llama stores its untied head in BF16 (vocab 610 × hidden 128).
constexpr std::size_t kHeadWeights = 610 * 128;

TEST(CliHead, RecordsSayTheHeadsFormatAndBytesAsHeld) {
  const auto dir = qjoule::test::temp_dir("cli_head_bench");
  const auto d =
      run_command(qjoule::test::no_sensors(dir) + qjoule() + " bench --model " + decoder_fixture_dir("tiny-llama") +
                  " --precisions fp32,int4:g=32 --seq 8 --decode-tokens 2 --threads 1 --warmup 0 --iters 1"
                  " --min-time 0 --idle 0 --out " +
                  (dir / "b").string() + " 2>&1");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const auto records = qjoule::test::read_records(dir / "b" / "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["head_format"], "fp32");
  EXPECT_EQ(records[0]["head_bytes"], kHeadWeights * 4);
  EXPECT_EQ(records[1]["head_format"], "bf16") << "the checkpoint's type below FP32";
  EXPECT_THAT(records[1]["kernel_paths"].dump(), HasSubstr("bf16 "));
  if (records[1]["kernel_paths"].dump().find("bf16 qjoule:avx2:bf16w") == std::string::npos) {
    EXPECT_EQ(records[1]["head_bytes"], kHeadWeights * 2);
  } else {  // qjoule's AVX2 BF16 kernel (no native BF16 matmul): rows padded to panels of 16, and their bias
    EXPECT_EQ(records[1]["head_bytes"], (610 + 14) * 128 * 2 + (610 + 14) * 4);
  }
}

TEST(CliHead, TheConsoleSaysTheHeadAndTheOptionsChangeIt) {
  const auto dir = qjoule::test::temp_dir("cli_head_ppl");
  const std::string common = qjoule() + " ppl --model " + decoder_fixture_dir("tiny-llama") + " --text " +
                             write_sample_text(dir).string() + " --ctx 32 --threads 1 --precision int4:g=32";
  const auto plain = run_command(common + " 2>&1");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr("head       bf16 "));
  EXPECT_THAT(plain.output, HasSubstr(" ×14\n")) << "the precision line counts the block Linears";
  const auto int8 = run_command(common + " --layer-precision 'lm_head=int8' 2>&1");
  ASSERT_EQ(int8.exit_code, 0) << int8.output;
  EXPECT_THAT(int8.output, HasSubstr("head       int8 "));
  const auto kept = run_command(common + " --quant-exclude lm_head 2>&1");
  ASSERT_EQ(kept.exit_code, 0) << kept.output;
  EXPECT_THAT(kept.output, HasSubstr("head       fp32 "));
  // An F32 checkpoint's head stays FP32 (its own type); tied, the embeddings read its FP32 rows.
  const auto f32 = run_command(qjoule() + " ppl --model " + decoder_fixture_dir("tiny-qwen3") + " --text " +
                               write_sample_text(dir).string() + " --ctx 32 --threads 1 --precision int4:g=32 2>&1");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  EXPECT_THAT(f32.output, HasSubstr("head       fp32 "));
  EXPECT_THAT(f32.output, HasSubstr("(tied; the token embeddings read its rows, held once)"));
  // An int8 head holds no such rows: the embeddings apart, in their own format.
  const auto apart = run_command(qjoule() + " ppl --model " + decoder_fixture_dir("tiny-qwen3") + " --text " +
                                 write_sample_text(dir).string() +
                                 " --ctx 32 --threads 1 --precision int4:g=32 --layer-precision 'lm_head=int8' 2>&1");
  ASSERT_EQ(apart.exit_code, 0) << apart.output;
  EXPECT_THAT(apart.output, HasSubstr("(tied; the embeddings are held apart, in fp32)"));
}

}  // namespace

// A GPTQ checkpoint end to end (written by the test from tiny-llama with qjoule's own int4 codes,
// ../model/prequantized_writer.h): `qjoule ppl` gives the perplexity of qjoule's own format on the same
// codes to the last digit, also when no --precision is given (ppl, generate and bench run the checkpoint's
// own format then); `qjoule bench` records where the weights came from and, with the unquantized model's
// reference, the same text quality; asking for another format, or FP32, is one line.
#include <fstream>
#include <string>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../model/prequantized/prequantized_writer.h"
#include "bench_cli_helpers.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::no_sensors;
using qjoule::test::read_records;
using qjoule::test::run_command;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path tiny_llama() { return qjoule::test::fixtures_dir() / "decoders" / "tiny-llama"; }

// dir/text.txt: 40 lines of plain English (about 1,100 tiny-llama tokens) for `ppl` and `bench --text`.
fs::path write_text(const fs::path& dir) {
  const auto text = dir / "text.txt";
  std::ofstream out(text);
  for (int i = 0; i < 40; ++i) out << "The quick brown fox " << i << " jumps over the lazy dog by the river.\n";
  return text;
}

// "perplexity 123.4567 ± ..." line of `qjoule ppl`.
std::string perplexity_line(const std::string& output) {
  const auto at = output.find("perplexity ");
  return at == std::string::npos ? output : output.substr(at, output.find('\n', at) - at);
}

TEST(CliPrequantized, AGptqCheckpointRunsAsQjoulesOwnFormatOnItsCodes) {
  const auto dir = qjoule::test::temp_dir("cli_prequantized");
  const auto gptq = dir / "tiny-llama-gptq";
  qjoule::test::write_prequantized_copy(tiny_llama(), gptq, {"gptq", 64, false, true, true},
                                        qjoule::test::qjoule_codes<qjoule::quant::BlockInt4Asym<64>>);
  const auto text = write_text(dir);
  const std::string common = " --text " + text.string() + " --ctx 64 --stride 32 --threads 1";
  const auto own =
      run_command(qjoule() + " ppl --model " + tiny_llama().string() + common + " --precision int4:g=64:asym 2>&1");
  const auto imported =
      run_command(qjoule() + " ppl --model " + gptq.string() + common + " --precision int4:g=64:asym 2>&1");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_EQ(perplexity_line(imported.output), perplexity_line(own.output));

  // No --precision: the checkpoint's own format, and the header says so.
  const auto asked_nothing = run_command(qjoule() + " ppl --model " + gptq.string() + common + " 2>&1");
  ASSERT_EQ(asked_nothing.exit_code, 0) << asked_nothing.output;
  EXPECT_EQ(perplexity_line(asked_nothing.output), perplexity_line(own.output));
  EXPECT_THAT(asked_nothing.output,
              HasSubstr("precision  int4:g=64:asym (the checkpoint's own format: gptq 4-bit, group_size 64, asym, "
                        "desc_act false, gptq_v2 zeros): "));
  // Its packed tensors are read by the Linears they make (no "not used by the model" warning).
  EXPECT_THAT(asked_nothing.output, ::testing::Not(HasSubstr("not used by the model"))) << asked_nothing.output;
  const auto generated = run_command(qjoule() + " generate --model " + gptq.string() +
                                     " --prompt 'The quick brown' --max-new 2 --threads 1 2>&1");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  EXPECT_THAT(generated.output, HasSubstr("precision  int4:g=64:asym (the checkpoint's own format: gptq"));

  // FP32 or another format: one line, saying what the checkpoint holds and how to run it.
  const auto fp32 = run_command(qjoule() + " ppl --model " + gptq.string() + common + " --precision fp32 2>&1");
  EXPECT_EQ(fp32.exit_code, 1) << fp32.output;
  EXPECT_THAT(fp32.output, HasSubstr("--precision fp32 asks for another format (a pre-quantized checkpoint runs in its "
                                     "own: --precision int4:g=64:asym"));
  const auto nf4 = run_command(qjoule() + " ppl --model " + gptq.string() + common + " --precision nf4 2>&1");
  EXPECT_EQ(nf4.exit_code, 1) << nf4.output;
  EXPECT_THAT(nf4.output, HasSubstr("--precision nf4 asks for another format"));

  // bench: the record says where the weights came from; with the unquantized model's reference
  // (--kl-base) the text quality equals the own-format run's on the unquantized checkpoint.
  const auto base = dir / "fp32.kl";
  ASSERT_EQ(run_command(qjoule() + " ppl --model " + tiny_llama().string() + common + " --save-kl-base " +
                        base.string() + " 2>&1")
                .exit_code,
            0);
  const std::string bench = no_sensors(dir) + qjoule() +
                            " bench --precisions int4:g=64:asym --seq 8 --decode-tokens 2 --iters 1 --idle 0" + common +
                            " --kl-base " + base.string();
  const auto b1 = run_command(bench + " --model " + gptq.string() + " --out " + (dir / "a").string() + " 2>&1");
  ASSERT_EQ(b1.exit_code, 0) << b1.output;
  const auto b2 = run_command(bench + " --model " + tiny_llama().string() + " --out " + (dir / "b").string() + " 2>&1");
  ASSERT_EQ(b2.exit_code, 0) << b2.output;
  const auto ra = read_records(dir / "a" / "results.jsonl").at(0), rb = read_records(dir / "b" / "results.jsonl").at(0);
  EXPECT_EQ(ra["weights_source"], "checkpoint: gptq 4-bit, group_size 64, asym, desc_act false, gptq_v2 zeros");
  EXPECT_TRUE(rb["weights_source"].is_null());
  for (const char* key : {"lm_ppl", "lm_kl_mean", "lm_same_top_rate", "model_bytes"})
    EXPECT_EQ(ra[key], rb[key]) << key;

  const auto other = run_command(no_sensors(dir) + qjoule() + " bench --model " + gptq.string() +
                                 " --precisions fp32 --seq 8 --out " + (dir / "c").string() + " 2>&1");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_THAT(other.output, HasSubstr("is a pre-quantized checkpoint (gptq 4-bit, group_size 64, asym, desc_act "
                                      "false, gptq_v2 zeros) whose codes run as int4:g=64:asym: give --precisions "
                                      "int4:g=64:asym"));
  // bench without --precisions: the checkpoint's own format, said on stderr.
  const auto own_sweep =
      run_command(no_sensors(dir) + qjoule() + " bench --model " + gptq.string() +
                  " --seq 8 --decode-tokens 2 --iters 1 --idle 0 --threads 1 --out " + (dir / "e").string() + " 2>&1");
  ASSERT_EQ(own_sweep.exit_code, 0) << own_sweep.output;
  EXPECT_THAT(own_sweep.output, HasSubstr("precisions int4:g=64:asym (the checkpoint's own format: gptq 4-bit"));
  const auto re = read_records(dir / "e" / "results.jsonl");
  ASSERT_EQ(re.size(), 1u);
  EXPECT_EQ(re[0]["precision"], "int4:g=64:asym");
  const auto no_base =
      run_command(no_sensors(dir) + qjoule() + " bench --model " + gptq.string() +
                  " --precisions int4:g=64:asym --seq 8" + common + " --out " + (dir / "d").string() + " 2>&1");
  EXPECT_EQ(no_base.exit_code, 1) << no_base.output;
  EXPECT_THAT(
      no_base.output,
      HasSubstr("with no FP32 weights to compute the reference from; give --reference DIR, its unquantized model, or "
                "--kl-base FILE"));
}

// `qjoule export` then import: the perplexity to the last digit of qjoule's own format on the original,
// for GPTQ and bitsandbytes layouts; the bench record of the import says where the weights came from.
TEST(CliPrequantized, ExportThenImportGivesTheSamePerplexity) {
  const auto dir = qjoule::test::temp_dir("cli_export_roundtrip");
  const auto text = write_text(dir);
  const std::string common = " --text " + text.string() + " --ctx 64 --stride 32 --threads 1";
  for (const std::string precision : {"int4:g=32:sym", "int4:g=128:asym", "nf4", "nf4:dq"}) {
    const auto out = dir / ("export-" + std::to_string(precision.size()) + precision.substr(0, 4));
    const auto exported = run_command(qjoule() + " export --model " + tiny_llama().string() + " --precision " +
                                      precision + " --out " + out.string() + " 2>&1");
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    EXPECT_THAT(exported.output, HasSubstr("14 Linears quantized"));
    const auto own = run_command(qjoule() + " ppl --model " + tiny_llama().string() + common + " --precision " +
                                 precision + " 2>&1");
    const auto imported =
        run_command(qjoule() + " ppl --model " + out.string() + common + " --precision " + precision + " 2>&1");
    ASSERT_EQ(imported.exit_code, 0) << imported.output;
    EXPECT_EQ(perplexity_line(imported.output), perplexity_line(own.output)) << precision;
    if (precision == "nf4:dq") {
      const auto b = run_command(no_sensors(dir) + qjoule() + " bench --model " + out.string() +
                                 " --precisions nf4:dq --seq 8 --decode-tokens 2 --iters 1 --idle 0 --out " +
                                 (dir / "bench").string() + " 2>&1");
      ASSERT_EQ(b.exit_code, 0) << b.output;
      EXPECT_EQ(read_records(dir / "bench" / "results.jsonl").at(0)["weights_source"],
                "checkpoint: bitsandbytes 4-bit nf4 with double quant");
    }
  }
  const auto gguf = run_command(qjoule() + " export --model " + tiny_llama().string() +
                                " --precision int4:g=32:sym --to gguf --out " + (dir / "m.gguf").string() + " 2>&1");
  ASSERT_EQ(gguf.exit_code, 0) << gguf.output;
  EXPECT_THAT(gguf.output, HasSubstr("int4:g=32:sym as GGUF Q4_0 (14 Linears), architecture llama, tokenizer llama"));
  EXPECT_TRUE(fs::is_regular_file(dir / "m.gguf"));
  // Read back: the same perplexity as qjoule's own int4:g=32:sym on the original.
  const auto back = run_command(qjoule() + " export --model " + (dir / "m.gguf").string() + " --out " +
                                (dir / "back").string() + " 2>&1");
  ASSERT_EQ(back.exit_code, 0) << back.output;
  EXPECT_THAT(back.output, HasSubstr("14 Q4_0 Linears as GPTQ (run it with --precision int4:g=32:sym)"));
  const auto own_g32 =
      run_command(qjoule() + " ppl --model " + tiny_llama().string() + common + " --precision int4:g=32:sym 2>&1");
  const auto back_g32 =
      run_command(qjoule() + " ppl --model " + (dir / "back").string() + common + " --precision int4:g=32:sym 2>&1");
  ASSERT_EQ(back_g32.exit_code, 0) << back_g32.output;
  EXPECT_EQ(perplexity_line(back_g32.output), perplexity_line(own_g32.output));
  const auto int8 = run_command(qjoule() + " export --model " + tiny_llama().string() + " --precision int8 --out " +
                                (dir / "int8").string() + " 2>&1");
  EXPECT_EQ(int8.exit_code, 1) << int8.output;
  EXPECT_THAT(int8.output, HasSubstr("--precision int8: no checkpoint layout holds it; qjoule exports"));
}

// --reference DIR: the unquantized model gives a pre-quantized checkpoint its FP32 references: the
// pseudo-random-prompt fidelity, and with --text the KL base (no --kl-base needed), the same text quality
// as the own-format run of the unquantized model; a reference that does not match is one line.
TEST(CliPrequantized, ReferenceGivesFidelityAndTheTextBase) {
  const auto dir = qjoule::test::temp_dir("cli_prequantized_reference");
  const auto gptq = dir / "gptq";
  const auto exported = run_command(qjoule() + " export --model " + tiny_llama().string() +
                                    " --precision int4:g=64:asym --out " + gptq.string() + " 2>&1");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto text = write_text(dir);
  const std::string bench = no_sensors(dir) + qjoule() +
                            " bench --precisions int4:g=64:asym --seq 8 --decode-tokens 2 --iters 1 --idle 0 "
                            "--threads 1";
  const auto fidelity = run_command(bench + " --model " + gptq.string() + " --reference " + tiny_llama().string() +
                                    " --out " + (dir / "a").string() + " 2>&1");
  ASSERT_EQ(fidelity.exit_code, 0) << fidelity.output;
  const auto own =
      run_command(bench + " --model " + tiny_llama().string() + " --out " + (dir / "b").string() + " 2>&1");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  const auto ra = read_records(dir / "a" / "results.jsonl").at(0), rb = read_records(dir / "b" / "results.jsonl").at(0);
  for (const char* key : {"fidelity_top1_agreement", "fidelity_mean_kl", "fidelity_max_abs_dlogit"}) {
    EXPECT_FALSE(ra[key].is_null()) << key;
    EXPECT_EQ(ra[key], rb[key]) << key;
  }

  const std::string lm = " --text " + text.string() + " --ctx 64 --stride 32";
  const auto with_text = run_command(bench + lm + " --model " + gptq.string() + " --reference " +
                                     tiny_llama().string() + " --out " + (dir / "c").string() + " 2>&1");
  ASSERT_EQ(with_text.exit_code, 0) << with_text.output;
  EXPECT_THAT(with_text.output, HasSubstr("from --reference '" + tiny_llama().string() + "'"));
  const auto own_text =
      run_command(bench + lm + " --model " + tiny_llama().string() + " --out " + (dir / "d").string() + " 2>&1");
  ASSERT_EQ(own_text.exit_code, 0) << own_text.output;
  const auto rc = read_records(dir / "c" / "results.jsonl").at(0), rd = read_records(dir / "d" / "results.jsonl").at(0);
  for (const char* key : {"lm_ppl", "lm_base_ppl", "lm_kl_mean", "lm_same_top_rate"})
    EXPECT_EQ(rc[key], rd[key]) << key;

  const auto not_prequantized = run_command(bench + " --model " + tiny_llama().string() + " --reference " +
                                            tiny_llama().string() + " --out " + (dir / "e").string() + " 2>&1");
  EXPECT_EQ(not_prequantized.exit_code, 1) << not_prequantized.output;
  EXPECT_THAT(not_prequantized.output, HasSubstr("no model of this sweep is a pre-quantized checkpoint"));
  const auto other = run_command(bench + " --model " + gptq.string() + " --reference " +
                                 (qjoule::test::fixtures_dir() / "decoders" / "tiny-qwen2").string() + " --out " +
                                 (dir / "f").string() + " 2>&1");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_THAT(other.output, HasSubstr("tiny-qwen2: a Qwen2ForCausalLM, but model '" + gptq.string() +
                                      "' is a LlamaForCausalLM; expected its unquantized model"));
}

// A BERT classifier exported as GPTQ: bench measures its accuracy, and with --reference its fidelity,
// equal to the own-format run of the unquantized model (the same codes); another precision is one line.
TEST(CliPrequantized, AnEncoderCheckpointIsBenchedWithItsReference) {
  const auto dir = qjoule::test::temp_dir("cli_prequantized_encoder");
  const auto bert = qjoule::test::fixtures_dir() / "tiny-bert";
  const auto gptq = dir / "gptq";
  ASSERT_EQ(run_command(qjoule() + " export --model " + bert.string() + " --precision int4:g=32:asym --out " +
                        gptq.string() + " 2>&1")
                .exit_code,
            0);
  const std::string bench = no_sensors(dir) + qjoule() + " bench --dataset " + (bert / "dataset.tsv").string() +
                            " --precisions int4:g=32:asym --batch 4 --seq 16 --iters 1 --idle 0 --threads 1";
  const auto a = run_command(bench + " --model " + gptq.string() + " --reference " + bert.string() + " --out " +
                             (dir / "a").string() + " 2>&1");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto b = run_command(bench + " --model " + bert.string() + " --out " + (dir / "b").string() + " 2>&1");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto ra = read_records(dir / "a" / "results.jsonl").at(0), rb = read_records(dir / "b" / "results.jsonl").at(0);
  EXPECT_EQ(ra["weights_source"], "checkpoint: gptq 4-bit, group_size 32, asym, desc_act false, gptq_v2 zeros");
  for (const char* key : {"accuracy", "fidelity_top1_agreement", "fidelity_mean_kl"}) {
    EXPECT_FALSE(ra[key].is_null()) << key;
    EXPECT_EQ(ra[key], rb[key]) << key;
  }
  const auto no_reference =
      run_command(bench + " --model " + gptq.string() + " --out " + (dir / "c").string() + " 2>&1");
  ASSERT_EQ(no_reference.exit_code, 0) << no_reference.output;
  const auto rc = read_records(dir / "c" / "results.jsonl").at(0);
  EXPECT_TRUE(rc["fidelity_top1_agreement"].is_null());
  EXPECT_EQ(rc["accuracy"], ra["accuracy"]);
  const auto other = run_command(no_sensors(dir) + qjoule() + " bench --model " + gptq.string() +
                                 " --precisions int8 --seq 16 --out " + (dir / "d").string() + " 2>&1");
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_THAT(other.output, HasSubstr("is a pre-quantized checkpoint (gptq 4-bit, group_size 32, asym, desc_act "
                                      "false, gptq_v2 zeros) whose codes run as int4:g=32:asym"));
}

// `qjoule eval` on a pre-quantized classifier without --precision: its own format, said in the header;
// fidelity is unavailable with the reason (no FP32 weights), not an error after the accuracy; FP32 asked
// for is one line.
TEST(CliPrequantized, EvalRunsAPrequantizedClassifierInItsOwnFormat) {
  const auto dir = qjoule::test::temp_dir("cli_prequantized_eval");
  const auto bert = qjoule::test::fixtures_dir() / "tiny-bert";
  const auto gptq = dir / "gptq";
  const auto exported = run_command(qjoule() + " export --model " + bert.string() +
                                    " --precision int4:g=32:sym --out " + gptq.string() + " 2>&1");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::string eval =
      qjoule() + " eval --model " + gptq.string() + " --dataset " + (bert / "dataset.tsv").string() + " --threads 1";
  const auto own = run_command(eval + " 2>&1");
  ASSERT_EQ(own.exit_code, 0) << own.output;
  EXPECT_THAT(own.output,
              HasSubstr("precision  int4:g=32:sym (the checkpoint's own format: gptq 4-bit, group_size 32"));
  EXPECT_THAT(own.output, HasSubstr("fidelity   unavailable: the checkpoint holds gptq 4-bit"));
  const auto fp32 = run_command(eval + " --precision fp32 2>&1");
  EXPECT_EQ(fp32.exit_code, 1) << fp32.output;
  EXPECT_THAT(fp32.output, HasSubstr("--precision fp32 asks for another format (a pre-quantized checkpoint runs in its "
                                     "own: --precision int4:g=32:sym or no --precision"));
}

// Paragraph 1 of issue 44 for AWQ and bitsandbytes too: `qjoule ppl` without --precision runs each
// checkpoint in its own format, with the perplexity of that format on the unquantized model.
TEST(CliPrequantized, AwqAndBitsandbytesRunInTheirOwnFormatWithoutAPrecision) {
  const auto dir = qjoule::test::temp_dir("cli_prequantized_own");
  const auto text = write_text(dir);
  const std::string common = " --text " + text.string() + " --ctx 64 --stride 32 --threads 1 2>&1";
  const auto awq = dir / "awq";
  qjoule::test::write_prequantized_copy(tiny_llama(), awq, {"awq", 64, false, true, false},
                                        qjoule::test::qjoule_codes<qjoule::quant::BlockInt4Asym<64>>);
  const auto bnb = dir / "bnb";
  ASSERT_EQ(run_command(qjoule() + " export --model " + tiny_llama().string() + " --precision nf4:dq --out " +
                        bnb.string() + " 2>&1")
                .exit_code,
            0);
  for (const auto& [model, spec, method] :
       {std::tuple{awq, std::string("int4:g=64:asym"), std::string("awq 4-bit")},
        std::tuple{bnb, std::string("nf4:dq"), std::string("bitsandbytes 4-bit")}}) {
    const auto asked_nothing = run_command(qjoule() + " ppl --model " + model.string() + common);
    ASSERT_EQ(asked_nothing.exit_code, 0) << asked_nothing.output;
    EXPECT_THAT(asked_nothing.output, HasSubstr("precision  " + spec + " (the checkpoint's own format: " + method));
    const auto own = run_command(qjoule() + " ppl --model " + tiny_llama().string() + " --precision " + spec + common);
    EXPECT_EQ(perplexity_line(asked_nothing.output), perplexity_line(own.output)) << spec;
  }
}

}  // namespace

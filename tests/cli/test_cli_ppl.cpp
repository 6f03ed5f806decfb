// End-to-end tests of `qjoule ppl` and `qjoule generate` on the tiny decoder fixtures, run as a user
// would: every precision on WikiText-2, the KL base round trip, and each bad input as one line.
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "qjoule/kernels/cuda_device.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::run_command;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path fixture(const std::string& name) { return qjoule::test::fixtures_dir() / "decoders" / name; }
std::string wikitext() { return qjoule::test::shared_data("wikitext2/test.txt").string(); }

// Exactly one line, "qjoule: error: ...", and exit status 1.
void expect_one_error_line(const qjoule::test::CommandResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("qjoule: error: "));
  EXPECT_THAT(r.output, HasSubstr(needle));
  const auto error_line = r.output.substr(r.output.find("qjoule: error: "));
  EXPECT_EQ(std::count(error_line.begin(), error_line.end(), '\n'), 1) << r.output;
}

TEST(CliPpl, EveryPrecisionRunsOnWikiText2AndComparesWithTheFp32Base) {
  QJOULE_REQUIRE_SHARED("wikitext2/test.txt");
  const auto dir = qjoule::test::temp_dir("cli_ppl");
  const std::string common = qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " + wikitext() +
                             " --max-tokens 400 --ctx 64 --stride 32 --threads 1";
  const auto base = run_command(common + " --save-kl-base " + (dir / "fp32.kl").string() + " --json " +
                                (dir / "fp32.json").string() + " 2>&1");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  EXPECT_THAT(base.output, HasSubstr("perplexity "));
  EXPECT_THAT(base.output, HasSubstr("399 tokens scored"));
  nlohmann::json j;
  std::ifstream(dir / "fp32.json") >> j;
  EXPECT_EQ(j["scored_tokens"], 399);
  EXPECT_EQ(j["device"], "cpu");
  for (const std::string p : {"bf16", "fp16", "int8", "w8", "int4", "nf4"}) {
    const auto r = run_command(common + " --precision " + p + " --kl-base " + (dir / "fp32.kl").string() + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << p << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("precision  " + p + ": "));
    EXPECT_THAT(r.output, HasSubstr(p + " ")) << "the format's kernel";
    EXPECT_THAT(r.output, HasSubstr(" ×14")) << "all 14 block Linears in it";
    // tiny-llama stores its head in BF16: held so below FP32, said on a line of its own.
    EXPECT_THAT(r.output, HasSubstr("head       bf16 ")) << p;
    EXPECT_THAT(r.output, HasSubstr("top-1 agreement"));
    EXPECT_THAT(r.output, HasSubstr("ΔPPL"));
  }
}

TEST(CliPpl, ContextBeyondThePositionsIsOneLineNamingBothNumbers) {
  const auto text = qjoule::test::temp_dir("cli_ppl_ctx") / "text.txt";
  std::ofstream(text) << "Hello world. The quick brown fox jumps over the lazy dog.\n";
  const auto r = run_command(qjoule() + " ppl --model " + fixture("tiny-gpt2").string() + " --text " + text.string() +
                             " --ctx 4096 2>&1");
  expect_one_error_line(r, "--ctx 4096 is beyond the model's max_position_embeddings = ");
}

// Numeric flags out of range: one line naming the flag, the value and the range (never a silent default).
TEST(CliPpl, NumericFlagsOutOfRangeAreOneLine) {
  const std::string ppl = qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " +
                          (fixture("tiny-llama") / "config.json").string();
  expect_one_error_line(run_command(ppl + " --ctx 0"), "--ctx: 0 is out of range, expected 2 to 10000000");
  expect_one_error_line(run_command(ppl + " --stride 0"), "--stride: 0 is out of range, expected 1 to 10000000");
  // --max-tokens: 0 is the whole text, as in bench; 1 token scores nothing.
  expect_one_error_line(run_command(ppl + " --max-tokens -5"),
                        "--max-tokens: -5 is out of range, expected 0 (the whole text) or 2 to");
  expect_one_error_line(run_command(ppl + " --max-tokens 1"),
                        "--max-tokens: 1 is out of range, expected 0 (the whole text) or 2 to");
  expect_one_error_line(run_command(ppl + " --threads 0"), "--threads: 0 is out of range, expected 1 to 1024");
  const std::string generate = qjoule() + " generate --model " + fixture("tiny-llama").string() + " --prompt hi";
  expect_one_error_line(run_command(generate + " --threads -1"), "--threads: -1 is out of range, expected 1 to 1024");
  expect_one_error_line(run_command(generate + " --max-new 0"), "--max-new: 0 is out of range, expected 1 to 1000000");
  expect_one_error_line(run_command(ppl + " --precision int8:sq=0.5"),
                        "--precision int8:sq=0.5: SmoothQuant is not supported for decoder models");
  expect_one_error_line(run_command(generate + " --precision int4:g=48"),
                        "precision 'int4:g=48': int4 group size '48', expected 32, 64 or 128");
}

// More threads than logical CPUs runs, with one warning line saying what it costs. One thread more than the CPUs:
// --threads 1024 took 37 s of CI's 2 cores for one token.
TEST(CliGenerate, MoreThreadsThanCpusIsAWarning) {
  const unsigned threads = std::max(std::thread::hardware_concurrency(), 1U) + 1;
  const auto r = run_command(qjoule() + " generate --model " + fixture("tiny-llama").string() +
                             " --prompt hi --max-new 1 --threads " + std::to_string(threads));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(fmt::format("warning: --threads {} is more than the ", threads)));
  EXPECT_THAT(r.output, HasSubstr("logical CPUs here: threads will share CPUs"));
}

// --max-tokens 0 scores the whole text, as `bench --max-tokens 0` does (and as leaving it out does).
TEST(CliPpl, MaxTokensZeroScoresTheWholeText) {
  const auto text = qjoule::test::temp_dir("cli_ppl_max0") / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 12; ++i) out << "The quick brown fox jumps over the lazy dog. ";
  }
  const std::string ppl = qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " + text.string() +
                          " --ctx 32 --threads 1";
  const auto all = run_command(ppl + " 2>&1"), zero = run_command(ppl + " --max-tokens 0 2>&1");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(zero.exit_code, 0) << zero.output;
  const auto scored = [](const std::string& out) {
    const auto at = out.find(" tokens scored");
    return at == std::string::npos ? std::string()
                                   : out.substr(out.rfind(' ', at - 1) + 1, at - out.rfind(' ', at - 1) - 1);
  };
  EXPECT_FALSE(scored(all.output).empty()) << all.output;
  EXPECT_EQ(scored(zero.output), scored(all.output)) << zero.output;
}

// A folder given as the text: one line saying so (not "the text is empty").
TEST(CliPpl, AFolderAsTheTextIsOneLine) {
  const auto dir = qjoule::test::temp_dir("cli_ppl_folder");
  const auto r =
      run_command(qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " + dir.string() + " 2>&1");
  expect_one_error_line(r, "--text " + dir.string() + ": is a folder, expected a UTF-8 text file");
}

TEST(CliPpl, AnEmptyTextIsOneLine) {
  const auto text = qjoule::test::temp_dir("cli_ppl_empty") / "empty.txt";
  std::ofstream(text) << "\n  \n";
  const auto r =
      run_command(qjoule() + " ppl --model " + fixture("tiny-qwen2").string() + " --text " + text.string() + " 2>&1");
  expect_one_error_line(r, "the text is empty");
}

TEST(CliPpl, ATextThatIsNotUtf8IsOneLineNamingTheFile) {
  const auto text = qjoule::test::temp_dir("cli_ppl_utf8") / "latin1.txt";
  std::ofstream(text) << "caf\xe9 au lait\n";
  const auto r = run_command(qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " + text.string());
  expect_one_error_line(r, "--text " + text.string() + ": invalid UTF-8 at byte offset 3");
}

TEST(CliPpl, AKlBaseWithATokenOutsideTheVocabularyIsOneLine) {
  const auto dir = qjoule::test::temp_dir("cli_ppl_bad_base");
  const auto text = dir / "text.txt";
  std::ofstream(text) << "Hello world. The quick brown fox jumps over the lazy dog, again and again.\n";
  const std::string common =
      qjoule() + " ppl --model " + fixture("tiny-llama").string() + " --text " + text.string() + " --ctx 16 --stride 8";
  ASSERT_EQ(run_command(common + " --save-kl-base " + (dir / "base.kl").string() + " 2>&1").exit_code, 0);
  {  // token id 0 -> 1,000,000 (ids start after the 56-byte header)
    std::fstream f(dir / "base.kl", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(56);
    const int32_t bad = 1000000;
    f.write(reinterpret_cast<const char*>(&bad), sizeof bad);
  }
  const auto r = run_command(common + " --precision int8 --kl-base " + (dir / "base.kl").string() + " 2>&1");
  expect_one_error_line(r, "token id 1000000 at index 0 is outside the vocabulary");
}

TEST(CliPpl, ATokenizerOfAnUnsupportedModelTypeIsOneLine) {
  const auto dir = qjoule::test::temp_dir("cli_ppl_tokenizer");
  fs::copy(fixture("tiny-gpt2"), dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  nlohmann::json tok;
  std::ifstream(dir / "tokenizer.json") >> tok;
  tok["model"]["type"] = "Unigram";
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  const auto text = dir / "text.txt";
  std::ofstream(text) << "Hello world.\n";
  const auto r = run_command(qjoule() + " ppl --model " + dir.string() + " --text " + text.string() + " 2>&1");
  expect_one_error_line(r, "Unigram");
}

// A model whose vocabulary is padded past its tokenizer's: a generated id with no token shows as <id N>.
TEST(CliGenerate, AnIdTheTokenizerLacksIsShownNotAnError) {
  const auto dir = qjoule::test::temp_dir("cli_generate_padded_vocab");
  fs::copy(fixture("tiny-llama"), dir / "m", fs::copy_options::recursive);
  fs::copy_file(qjoule::test::fixtures_dir() / "bpe" / "byte_level" / "tokenizer.json", dir / "m" / "tokenizer.json",
                fs::copy_options::overwrite_existing);  // 556 tokens for the model's 610 rows
  const auto r = run_command(qjoule() + " generate --model " + (dir / "m").string() +
                             " --prompt 'The quick brown fox' --max-new 64 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("<id 5"));  // an id in [556, 610)
}

TEST(CliGenerate, GreedyGenerationPrintsSpeedsAndText) {
  const auto r = run_command(qjoule() + " generate --model " + fixture("tiny-qwen2").string() +
                             " --prompt 'The quick brown fox' --max-new 8 --precision int8 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("prefill    "));
  EXPECT_THAT(r.output, HasSubstr("stopped    "));
  EXPECT_THAT(r.output, HasSubstr("The quick brown fox"));
}

// `--device cuda` on every decoder command goes to the one decoder graph on the CUDA backend. Without
// a usable GPU (or a build without the CUDA backend) each says so in one line, the line `eval` says;
// with one, perplexity on the GPU equals the CPU's within 0.5% per format (issue 17's acceptance).
TEST(CliDecoderGpu, PplGenerateAndBenchOnCudaReachTheDeviceCheck) {
  const auto dir = qjoule::test::temp_dir("cli_decoder_device");
  const auto text = dir / "text.txt";
  std::ofstream(text) << "The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst "
                         "of times, it was the age of wisdom, it was the age of foolishness.\n";
  const std::string model = fixture("tiny-llama").string();
  // WikiText-2 where ../shared is there (the first 2,000 tokens), else a sentence of our own.
  const bool wiki = fs::exists(wikitext());
  const std::string ppl = qjoule() + " ppl --model " + model + " --text " + (wiki ? wikitext() : text.string()) +
                          (wiki ? " --max-tokens 2000 --ctx 128 --stride 64" : " --ctx 32 --stride 16");
  const auto& status = qjoule::kernels::cuda_device_status();
  if (!status.usable) {
    for (const std::string& command :
         {ppl + " --device cuda", qjoule() + " generate --model " + model + " --prompt 'The quick' --device cuda",
          qjoule() + " bench --model " + model + " --seq 8 --device cuda --out " + (dir / "b").string(),
          ppl + " --device cuda:1 --precision nf4"}) {
      const auto r = run_command(command + " 2>&1");
      expect_one_error_line(r, status.reason);
      EXPECT_THAT(r.output, HasSubstr("--device cuda"));
      EXPECT_THAT(r.output, ::testing::Not(HasSubstr("not supported"))) << command;
      EXPECT_THAT(r.output, ::testing::Not(HasSubstr("do not run on the GPU"))) << command;
    }
    return;
  }
  const auto perplexity = [](const std::string& output) {
    const auto at = output.find("perplexity ");
    return at == std::string::npos ? -1.0 : std::stod(output.substr(at + 11));
  };
  for (const std::string p : {"fp32", "fp16", "bf16", "int8", "int4", "nf4", "nf4:dq"}) {
    const auto cpu = run_command(ppl + " --precision " + p + " 2>&1");
    const auto gpu = run_command(ppl + " --precision " + p + " --device cuda 2>&1");
    ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
    ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
    EXPECT_THAT(gpu.output, HasSubstr("device     GPU 0: "));
    EXPECT_THAT(gpu.output, HasSubstr("held in GPU memory"));
    EXPECT_NEAR(perplexity(gpu.output), perplexity(cpu.output), 0.005 * perplexity(cpu.output)) << p;
  }
  const auto gen = run_command(qjoule() + " generate --model " + model + " --prompt 'The quick' --device cuda 2>&1");
  EXPECT_EQ(gen.exit_code, 0) << gen.output;
  const auto bench =
      run_command(qjoule() + " bench --model " + model + " --seq 8 --device cuda --precisions fp32,nf4 --out " +
                  (dir / "b").string() + " 2>&1");
  EXPECT_EQ(bench.exit_code, 0) << bench.output;
}

}  // namespace

namespace {

// A deterministic English-like text of `words` words (a small vocabulary, Zipf-ish by repetition).
void write_words(const fs::path& path, int words, unsigned seed) {
  static const char* kWords[] = {"the", "cat", "sat", "on",  "a",   "mat", "and", "dog", "ran", "to",    "house",
                                 "of",  "in",  "it",  "was", "big", "red", "old", "man", "saw", "river", "tree"};
  std::ofstream out(path);
  unsigned s = seed;
  for (int i = 0; i < words; ++i) {
    s = s * 1103515245u + 12345u;
    const unsigned r = (s >> 16) % 64;
    out << kWords[r < 22 ? r : (r * 7) % 8] << ((i + 1) % 12 == 0 ? ".\n" : " ");
  }
}

double mean_kl_of(const fs::path& json) {
  nlohmann::json j;
  std::ifstream(json) >> j;
  return j["kl"]["mean_kl"].get<double>();
}

}  // namespace

// int4:...:gptq calibrates on --calib (a progress line a block, the header says how), runs the kernels
// round-to-nearest runs, and lands closer to FP32 than RTN on held-out text; calibrating on the scored
// text itself is a warning.
TEST(CliPpl, GptqAndAwqCalibrateOnTheCalibTextAndRunRtnsKernelsCloserToFp32) {
  const auto dir = qjoule::test::temp_dir("cli_ppl_gptq");
  fs::create_directories(dir);
  write_words(dir / "calib.txt", 4000, 1);
  write_words(dir / "scored.txt", 1500, 2);
  const std::string common = qjoule::test::qjoule_binary().string() + " ppl --model " + fixture("tiny-llama").string() +
                             " --text " + (dir / "scored.txt").string() + " --ctx 64 --stride 32 --threads 1";
  ASSERT_EQ(run_command(common + " --save-kl-base " + (dir / "fp32.kl").string() + " 2>&1").exit_code, 0);
  const std::string kl = " --kl-base " + (dir / "fp32.kl").string();
  const auto rtn = run_command(common + kl + " --precision int4:g=32 --json " + (dir / "rtn.json").string() + " 2>&1");
  ASSERT_EQ(rtn.exit_code, 0) << rtn.output;
  const std::string calib = " --calib " + (dir / "calib.txt").string() + " --calib-sequences 8 --calib-tokens 64";
  const auto gptq =
      run_command(common + kl + calib + " --precision int4:g=32:gptq --json " + (dir / "gptq.json").string() + " 2>&1");
  ASSERT_EQ(gptq.exit_code, 0) << gptq.output;
  EXPECT_THAT(gptq.output, HasSubstr("block 2/2 calibrated (7 Linears, GPTQ)"));
  // ", BF16 recording products" between them where this machine's BF16 peak beats its FP32 one.
  EXPECT_THAT(gptq.output, AllOf(HasSubstr("calibrated GPTQ on " + (dir / "calib.txt").string() +
                                           ": 8 sequences × 64 tokens, damp 0.01, "),
                                 HasSubstr(", 14 Linears in ")));
  const auto summary = [](const std::string& out) {  // the kernels, after "precision  SPEC: "
    const auto at = out.find("precision  ");
    const auto colon = out.find(": ", at);
    return out.substr(colon, out.find('\n', colon) - colon);
  };
  EXPECT_EQ(summary(gptq.output), summary(rtn.output)) << "the same kernels, fused the same way";
  nlohmann::json j;
  std::ifstream(dir / "gptq.json") >> j;
  EXPECT_THAT(j["calibration"].get<std::string>(), HasSubstr("GPTQ on "));
  EXPECT_LT(mean_kl_of(dir / "gptq.json"), 0.9 * mean_kl_of(dir / "rtn.json"));
  const auto awq =
      run_command(common + kl + calib + " --precision int4:g=32:awq --json " + (dir / "awq.json").string() + " 2>&1");
  ASSERT_EQ(awq.exit_code, 0) << awq.output;
  EXPECT_THAT(awq.output,
              AllOf(HasSubstr("calibrated AWQ on " + (dir / "calib.txt").string() + ": 8 sequences × 64 tokens, "),
                    HasSubstr(", 14 Linears in ")));
  EXPECT_EQ(summary(awq.output), summary(rtn.output)) << "the same kernels, fused the same way";
  EXPECT_LT(mean_kl_of(dir / "awq.json"), mean_kl_of(dir / "rtn.json"));

  const auto same = run_command(common + " --precision int4:g=32:gptq --calib " + (dir / "scored.txt").string() +
                                " --calib-sequences 2 --calib-tokens 64 2>&1");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_THAT(same.output, HasSubstr("warning: --calib " + (dir / "scored.txt").string() +
                                     " overlaps the text being scored (--text " + (dir / "scored.txt").string()));
}

// GPTQ and AWQ on a trained decoder (tests/fixtures/decoders/trained-llama, trained on WikiText-2's valid
// split by tools/train_tiny_decoder_fixture.py; RTN int4:g=128:sym costs it 3.9% perplexity) scored on the
// first 20,000 tokens of the test split, calibrated on valid.txt with the defaults (64 × 128 tokens): at
// G = 128 sym, 64 asym and 32 sym, their ΔPPL is never above RTN's and their mean KL to FP32 is lower; at
// G = 128 sym each recovers at least 25% of RTN's ΔPPL here (GPTQ 34%, AWQ 41% measured; on the whole
// test split, 805,558 tokens, issue 42's closing notes give the figures, too slow for the suite).
TEST(CliPpl, GptqAndAwqOnATrainedDecoderRecoverRoundToNearestsLoss) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "numbers, not memory: the release pass runs it (GPTQ's paths run under ASan in the faster tests)";
#endif
  QJOULE_REQUIRE_SHARED("wikitext2/test.txt");
  QJOULE_REQUIRE_SHARED("wikitext2/valid.txt");
  const auto dir = qjoule::test::temp_dir("cli_ppl_gptq_trained");
  fs::create_directories(dir);
  const std::string common = qjoule::test::qjoule_binary().string() + " ppl --model " +
                             fixture("trained-llama").string() + " --text " + wikitext() + " --max-tokens 20000";
  const auto fp32 = run_command(common + " --save-kl-base " + (dir / "fp32.kl").string() + " --json " +
                                (dir / "fp32.json").string() + " 2>&1");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  nlohmann::json mine, torch;
  std::ifstream(dir / "fp32.json") >> mine;
  std::ifstream(fixture("trained-llama") / "reference_ppl.json") >> torch;
  EXPECT_NEAR(mine["ppl"].get<double>(), torch["ppl"].get<double>(), 1e-4 * torch["ppl"].get<double>())
      << "FP32 as PyTorch scores the same tokens";
  double base_ppl = 0.0;
  const auto run = [&](const std::string& precision, const std::string& extra) {
    const auto json = dir / (precision + ".json");
    const auto r = run_command(common + " --precision " + precision + " --kl-base " + (dir / "fp32.kl").string() +
                               extra + " --json " + json.string() + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json j;
    std::ifstream(json) >> j;
    base_ppl = j["kl"]["base_ppl"].get<double>();
    return std::make_pair(j["kl"]["delta_ppl"].get<double>(), j["kl"]["mean_kl"].get<double>());
  };
  const std::string calib = " --calib " + qjoule::test::shared_data("wikitext2/valid.txt").string();
  // Three of the six layouts (all six, on the whole split, are in issue 42's closing note): the suite's time.
  for (const auto& [g, scheme] : {std::pair<std::string, std::string>{"128", "sym"}, {"64", "asym"}, {"32", "sym"}}) {
    {
      const std::string rtn_spec = "int4:g=" + g + ":" + scheme;
      const auto [rtn_dppl, rtn_kl] = run(rtn_spec, "");
      const auto [gptq_dppl, gptq_kl] = run(rtn_spec + ":gptq", calib);
      const auto [awq_dppl, awq_kl] = run(rtn_spec + ":awq", calib);
      RecordProperty(rtn_spec,
                     fmt::format("RTN ΔPPL {:.4f} KL {:.5f}; GPTQ ΔPPL {:.4f} KL {:.5f}; AWQ ΔPPL {:.4f} KL {:.5f}",
                                 rtn_dppl, rtn_kl, gptq_dppl, gptq_kl, awq_dppl, awq_kl));
      EXPECT_LE(gptq_dppl, rtn_dppl) << rtn_spec;
      EXPECT_LT(gptq_kl, rtn_kl) << rtn_spec;
      EXPECT_LE(awq_dppl, rtn_dppl) << rtn_spec;
      EXPECT_LT(awq_kl, rtn_kl) << rtn_spec;
      if (rtn_spec == "int4:g=128:sym") {
        EXPECT_GE(rtn_dppl, 0.01 * base_ppl) << "RTN costs at least 1% perplexity: something to recover";
        EXPECT_GE((rtn_dppl - gptq_dppl) / rtn_dppl, 0.25) << "RTN ΔPPL " << rtn_dppl << ", GPTQ " << gptq_dppl;
        EXPECT_GE((rtn_dppl - awq_dppl) / rtn_dppl, 0.25) << "RTN ΔPPL " << rtn_dppl << ", AWQ " << awq_dppl;
      }
    }
  }
}

// End-to-end tests of `qjoule info`, `qjoule eval` and `--version`, run as a user would.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <span>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/kernels/cuda_device.h"
#include "qjoule/io/safetensors.h"
#include "run_command.h"
#include "test_paths.h"

namespace {

using qjoule::test::run_command;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

std::string qjoule() { return qjoule::test::qjoule_binary().string(); }
fs::path tiny_bert() { return qjoule::test::fixtures_dir() / "tiny-bert"; }

std::vector<std::vector<std::string>> read_tsv(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, '\t')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// Every logit of `got` within `budget` of `ref` (same TSV layout); returns the max difference.
double max_logit_diff(const fs::path& got, const fs::path& ref) {
  const auto a = read_tsv(got), b = read_tsv(ref);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_EQ(a.at(0), b.at(0)) << "headers differ";
  double max_diff = 0;
  for (size_t i = 1; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(a[i][0], b[i][0]);
    EXPECT_EQ(a[i][1], b[i][1]) << "label of row " << i;
    for (size_t j = 3; j < std::min(a[i].size(), b[i].size()); ++j)
      max_diff = std::max(max_diff, std::fabs(std::stod(a[i][j]) - std::stod(b[i][j])));
  }
  return max_diff;
}

TEST(CliEval, VersionNamesCommitBuildAndBackends) {
  const auto r = run_command(qjoule() + " --version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("qjoule 0."));
  EXPECT_THAT(r.output, HasSubstr("commit "));
  EXPECT_THAT(r.output, HasSubstr("backends: cpu(oneDNN"));
}

TEST(CliEval, InfoDescribesTheTinyBert) {
  const auto r = run_command(qjoule() + " info --model " + tiny_bert().string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("BertForSequenceClassification (bert)"));
  EXPECT_THAT(r.output, HasSubstr("hidden 32, layers 2, heads 4 (head size 8), FFN 64, vocab 53, positions 40"));
  EXPECT_THAT(r.output, HasSubstr("NEGATIVE, NEUTRAL, POSITIVE"));
  EXPECT_THAT(r.output, HasSubstr("layer   1"));
}

TEST(CliEval, InfoListsTheFormatTable) {
  const auto r = run_command(qjoule() + " info --formats");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("int4   4.125  weight-only cpu, cuda  4-bit integers"));
  EXPECT_THAT(r.output, HasSubstr("[g=32|64|128, sym|asym, a8]"));
  EXPECT_THAT(r.output, HasSubstr("nf4    4.500  weight-only cpu, cuda  NormalFloat-4"));
  EXPECT_THAT(r.output, HasSubstr("fp8    8.000  w+act       cuda       FP8 E4M3"));
  for (std::size_t start = 0, end; (end = r.output.find('\n', start)) != std::string::npos; start = end + 1)
    EXPECT_LE(end - start, 100u) << "a line wider than a terminal: " << r.output.substr(start, end - start);
  const auto none = run_command(qjoule() + " info");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.output, HasSubstr("info: --model DIR is required (or --formats for the format table)"));
  const auto both = run_command(qjoule() + " info --formats --model " + tiny_bert().string());
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_THAT(both.output, HasSubstr("--formats and --model are two questions"));
}

TEST(CliEval, TinyBertTextDatasetMatchesPyTorchLogits) {
  const auto out = qjoule::test::temp_dir("cli_tiny_bert") / "logits.tsv";
  const auto r = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                             (tiny_bert() / "dataset.tsv").string() + " --batch 5 --dump-logits " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("accuracy   4/12 = 0.3333"));
  EXPECT_LT(max_logit_diff(out, tiny_bert() / "reference_logits.tsv"), 1e-4);
}

TEST(CliEval, Sst2DistilBertMiniMatchesPyTorch) {
  QJOULE_REQUIRE_SHARED("models/sst2-distilbert-mini/reference/dev_logits.tsv");
  const auto model = qjoule::test::shared_data("models/sst2-distilbert-mini");
  const auto out = qjoule::test::temp_dir("cli_sst2") / "logits.tsv";
  const auto r = run_command(qjoule() + " eval --model " + model.string() + " --dataset " +
                             qjoule::test::shared_data("sst2/dev.tsv").string() +
                             " --precision fp32 --max-length 128 --dump-logits " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("accuracy   717/872 = 0.8222"));
  const double diff = max_logit_diff(out, model / "reference/dev_logits.tsv");
  EXPECT_LT(diff, 1e-4);
  std::printf("max |logit - PyTorch| over 872 sentences: %.3g\n", diff);
}

struct BadInput {
  std::string name;
  std::string dataset_text;  // written to a file named `dataset_name`
  std::string dataset_name;
  std::string extra_args;
  std::string expected;
};
void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

// A flag outside its range, on a one-row dataset.
BadInput flag_case(std::string name, std::string flag, std::string expected) {
  return {std::move(name), "sentence\tlabel\ngood film\t1\n", "d.tsv", std::move(flag), std::move(expected)};
}

class CliEvalBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliEvalBadInput, OneClearLine) {
  const auto& p = GetParam();
  const auto dir = qjoule::test::temp_dir("cli_eval_bad_" + p.name);
  std::ofstream(dir / p.dataset_name) << p.dataset_text;
  const auto r = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                             (dir / p.dataset_name).string() + " " + p.extra_args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr(p.expected)) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliEvalBadInput,
    ::testing::Values(
        BadInput{"label_too_big", "sentence\tlabel\ngood film\t3\n", "d.tsv", "", "label 3"},
        BadInput{"unknown_precision", "sentence\tlabel\ngood film\t1\n", "d.tsv", "--precision int3",
                 "precision 'int3': unknown format 'int3'; expected one of fp32"},
        BadInput{"act_dtype", "sentence\tlabel\ngood film\t1\n", "d.tsv", "--act-dtype fp8",
                 "--act-dtype 'fp8' is not supported, expected f32 or bf16"},
        flag_case("batch_zero", "--batch 0", "--batch: 0 is out of range, expected 1 to 1000000"),
        flag_case("batch_negative", "--batch -1", "--batch: -1 is out of range, expected 1 to 1000000"),
        flag_case("max_length_zero", "--max-length 0", "--max-length: 0 is out of range, expected 1 to 1000000"),
        flag_case("threads_zero", "--threads 0", "--threads: 0 is out of range, expected 1 to 1024"),
        flag_case("threads_negative", "--threads -2", "--threads: -2 is out of range, expected 1 to 1024"),
        flag_case("threads_huge", "--threads 100000", "--threads: 100000 is out of range, expected 1 to 1024"),
        flag_case("calib_not_a_number_nor_a_file", "--calib many",
                  "--calib many: no such file; expected a calibration dataset (.tsv, .jsonl) or SmoothQuant's example "
                  "count"),
        BadInput{"empty", "sentence\tlabel\n", "d.tsv", "", "empty"},
        BadInput{"id_out_of_vocab", "{\"input_ids\": [2, 60, 3], \"label\": 1}\n", "d.jsonl", "",
                 "token id 60 at batch row 0, position 1 is outside the vocabulary [0, 53)"}),
    [](const auto& test_info) { return test_info.param.name; });

// A NaN in a weight is one line naming the tensor at every precision, FP32 included (it ran before and
// agreed with itself).
TEST(CliEval, NonFiniteWeightsFailAtEveryPrecision) {
  const auto dir = qjoule::test::temp_dir("cli_eval_nan_weights");
  for (const char* file : {"config.json", "vocab.txt", "tokenizer_config.json"})
    std::filesystem::copy_file(tiny_bert() / file, dir / file, std::filesystem::copy_options::overwrite_existing);
  {
    const auto original = qjoule::io::Checkpoint::open(tiny_bert());
    std::vector<std::vector<float>> values;
    std::vector<qjoule::io::TensorToWrite> tensors;
    values.reserve(1);  // one modified tensor: its span stays valid
    for (const auto& [name, t] : original.tensors()) {
      if (name != "classifier.weight") {
        tensors.push_back({name, t.dtype, t.shape, std::span<const std::byte>(t.data, t.nbytes)});
        continue;
      }
      values.push_back(original.to_f32(name));
      values.back()[4] = std::nanf("");
      tensors.push_back({name, qjoule::io::DType::F32, t.shape, std::as_bytes(std::span(values.back()))});
    }
    qjoule::io::write_safetensors(dir / "model.safetensors", tensors);
  }
  for (const char* precision : {"fp32", "int8"}) {
    const auto r = run_command(qjoule() + " eval --model " + dir.string() + " --dataset " +
                               (tiny_bert() / "dataset.tsv").string() + " --precision " + precision);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("tensor 'classifier.weight' [3, 32] has NaN at [0, 4]; expected finite values"))
        << precision;
    EXPECT_THAT(r.output, Not(HasSubstr("accuracy")));
  }
}

TEST(CliEval, QuantizedRunReportsFidelityAndEmulatedActivations) {
  const auto r = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                             (tiny_bert() / "dataset.tsv").string() + " --precision int8 --act-dtype bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("model      " + tiny_bert().string() + " (BertForSequenceClassification, 3 labels)"));
  EXPECT_THAT(r.output, HasSubstr("fidelity   top-1 agreement with FP32 "));
  EXPECT_THAT(r.output, HasSubstr("(FP32 accuracy 4/12 = 0.3333)"));
  EXPECT_THAT(r.output, HasSubstr("activations bf16 (emulated"));
  EXPECT_THAT(r.output, HasSubstr("speed not representative"));
  const auto plain = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                                 (tiny_bert() / "dataset.tsv").string());
  EXPECT_THAT(plain.output, Not(HasSubstr("fidelity"))) << "FP32 is its own reference";
  const auto skipped = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                                   (tiny_bert() / "dataset.tsv").string() + " --precision nf4 --no-fidelity");
  EXPECT_THAT(skipped.output, Not(HasSubstr("fidelity")));
}

// GPTQ on a classifier: calibrated on --calib's first examples, a progress line a block, the calibration
// in the output, an overlap with the scored dataset named; the fidelity line compares with FP32.
TEST(CliEval, CalibratesGptqOnADataset) {
  const std::string data = (tiny_bert() / "dataset.tsv").string();
  const auto r = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " + data +
                             " --precision int4:g=32:gptq --calib " + data + " --calib-sequences 8 --calib-tokens 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("block 2/2 calibrated (6 Linears, GPTQ)"));
  EXPECT_THAT(r.output, HasSubstr("calibrated GPTQ on " + data + ": 8 sequences of up to 6 tokens ("));
  EXPECT_THAT(r.output, HasSubstr("warning: --calib " + data + " overlaps the text being scored (--dataset " + data));
  EXPECT_THAT(r.output, HasSubstr("fidelity   top-1 agreement with FP32"));
  EXPECT_THAT(r.output, HasSubstr("[q+k+v fused]"));
}

// One precision grammar for every command: eval takes bench's SmoothQuant spelling and the new one.
TEST(CliEval, PrecisionSpecsAreBenchsGrammar) {
  const std::string base = qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                           (tiny_bert() / "dataset.tsv").string() + " --no-fidelity";
  const auto current = run_command(base + " --precision int8:sq=0.5 --calib 4");
  ASSERT_EQ(current.exit_code, 0) << current.output;
  EXPECT_THAT(current.output, HasSubstr("smoothquant: alpha 0.5, calibrated on the first 4 examples"));
  EXPECT_THAT(current.output, Not(HasSubstr("old spelling")));
  const auto old = run_command(base + " --precision int8:sq0.5 --calib 4");
  ASSERT_EQ(old.exit_code, 0) << old.output;
  EXPECT_THAT(old.output,
              HasSubstr("note: precision 'int8:sq0.5': 'sq0.5' is the old spelling of 'sq=0.5' (still read)"));
  EXPECT_THAT(old.output, HasSubstr("smoothquant: alpha 0.5, calibrated on the first 4 examples"));
  const auto accuracy_line = [](const std::string& out) { return out.substr(out.find("accuracy   ")).substr(0, 30); };
  EXPECT_EQ(accuracy_line(old.output), accuracy_line(current.output));
  const auto int4 = run_command(base + " --precision int4:g=32:asym");
  ASSERT_EQ(int4.exit_code, 0) << int4.output;
  EXPECT_THAT(int4.output, HasSubstr("precision  int4:g=32:asym: "));

  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--precision int8:sq=0.5 --smoothquant 0.7",
            "--smoothquant 0.7 and --precision int8:sq=0.5 give two SmoothQuant alphas; expected one"},
           {"--precision int8:sq=2", "precision 'int8:sq=2': SmoothQuant alpha 2 is outside [0, 1]"},
           {"--precision w8:sq=0.5", "precision 'w8:sq=0.5': option 'sq=0.5' applies to int8 only, not to w8"},
           {"--precision fp8", "--precision fp8: fp8 runs on CUDA only; on the CPU expected one of fp32, bf16"},
           {"--precision int8 --layer-precision '*.ffn.*=int8:sq=0.5'",
            "--layer-precision '*.ffn.*=int8:sq=0.5': SmoothQuant takes one alpha for the whole model"}}) {
    const auto r = run_command(base + " " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(expected)) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

// `--device cuda`: without a usable GPU (or without the CUDA backend) one line with the reason and exit 1;
// with one, the whole model runs on the GPU and its logits match the CPU's.
TEST(CliEval, DeviceCudaRunsOnTheGpuOrSaysWhyNot) {
#if defined(__SANITIZE_ADDRESS__)
  // Where a driver is present, the CUDA runtime's allocations read as leaks under LeakSanitizer.
  GTEST_SKIP() << "--device cuda is checked in release builds";
#endif
  const auto& status = qjoule::kernels::cuda_device_status();
  const auto dir = qjoule::test::temp_dir("cli_eval_cuda");
  const std::string base =
      qjoule() + " eval --model " + tiny_bert().string() + " --dataset " + (tiny_bert() / "dataset.tsv").string();
  if (!status.usable) {
    for (const std::string device : {"cuda", "cuda:1"}) {
      const auto r = run_command(base + " --device " + device + " --precision int8");
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_THAT(r.output, HasSubstr("--device " + device + ": " + status.reason)) << r.output;
      EXPECT_THAT(r.output, Not(HasSubstr("internal error")));
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    }
    if (!status.built) {
      EXPECT_THAT(status.reason, HasSubstr("built without the CUDA backend"));
    }
    const auto bad = run_command(base + " --device tpu");
    EXPECT_EQ(bad.exit_code, 1) << bad.output;
    EXPECT_THAT(bad.output, HasSubstr("--device tpu: expected cpu, cuda or cuda:N"));
    return;
  }
  const auto cpu = run_command(base + " --dump-logits " + (dir / "cpu.tsv").string());
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  const auto gpu = run_command(base + " --device cuda --dump-logits " + (dir / "gpu.tsv").string());
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_THAT(gpu.output, HasSubstr("device     cuda: GPU 0: "));
  EXPECT_THAT(gpu.output, HasSubstr("cublaslt:f32"));
  EXPECT_THAT(gpu.output, HasSubstr("held in GPU memory"));
  EXPECT_THAT(gpu.output, HasSubstr("accuracy   4/12 = 0.3333"));
  EXPECT_LT(max_logit_diff(dir / "gpu.tsv", dir / "cpu.tsv"), 1e-4);
  // Every format with a CUDA kernel runs (fidelity against the CPU's FP32); the others are one line.
  const int sm = status.compute_capabilities.at(0);
  for (const std::string p : {"tf32", "fp16", "bf16", "int8", "fp8", "int4:g32", "int4:g32:asym"}) {
    if ((p == "fp8" && sm < 89) || ((p == "tf32" || p == "bf16") && sm < 80)) continue;  // refused below
    const auto r = run_command(base + " --device cuda --precision " + p);
    EXPECT_EQ(r.exit_code, 0) << p << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("fidelity   top-1 agreement with FP32 ")) << p;
  }
  // One graph for both devices: the emulated BF16 activations run on the GPU too.
  const auto bf16_act = run_command(base + " --device cuda --precision int8 --act-dtype bf16");
  EXPECT_EQ(bf16_act.exit_code, 0) << bf16_act.output;
  EXPECT_THAT(bf16_act.output, HasSubstr("activations bf16 (emulated"));
  for (const auto& [args, expected] : std::vector<std::pair<std::string, std::string>>{
           {"--precision w8", "--precision w8 on the GPU: precision 'w8' (INT8 weight-only) has no CUDA kernel"},
           {"--precision int8 --smoothquant", "SmoothQuant runs on the CPU only"},
           {"--precision int8 --emulate", "fake quantization runs on the CPU only"}}) {
    const auto r = run_command(base + " --device cuda " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(expected)) << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(CliEval, OverlongTextIsTruncatedWithOneWarning) {
  const auto dir = qjoule::test::temp_dir("cli_overlong");
  std::string text = "sentence\tlabel\n";
  for (int row = 0; row < 3; ++row) {
    for (int i = 0; i < 60; ++i) text += "good ";
    text += "\t1\n";
  }
  std::ofstream(dir / "long.tsv") << text;
  const auto r = run_command(qjoule() + " eval --model " + tiny_bert().string() + " --dataset " +
                             (dir / "long.tsv").string() + " --max-length 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--max-length 100 exceeds the model's max_position_embeddings 40; using 40"));
  EXPECT_THAT(r.output, HasSubstr("3 of 3 examples were longer than 40 tokens and were truncated"));
}

}  // namespace

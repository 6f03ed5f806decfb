// Adding a format is a row plus a kernel: a toy format registered here and nowhere else (its quant row,
// its CPU row with a `_ref` Linear) runs from the CLI on the CPU like qjoule's own: `eval`, `ppl` and
// `bench` build it, name its kernel in their output and records, `info --formats` lists it, a spec with an
// option it does not take and a GPU it has no kernel on are one line each.
//
// toy8: each weight row rounded to 255 levels of its max |w| (INT8 codes, an FP32 scale a row), the
// product in the scalar loop of its _ref (FP32 x, double sums): the arithmetic of a weight-only format.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_cli_helpers.h"
#include "cli/run_cli.h"
#include "error_of.h"
#include "qjoule/kernels/backend_registry.h"
#include "qjoule/quant/format.h"
#include "test_paths.h"

namespace {

using qjoule::test::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;
namespace kernels = qjoule::kernels;
namespace quant = qjoule::quant;

class Toy8Linear final : public kernels::Linear {
 public:
  Toy8Linear(const float* W, const float* bias, int64_t out, int64_t in) : out_(out), in_(in) {
    codes_.resize(static_cast<std::size_t>(out * in));
    scales_.resize(static_cast<std::size_t>(out));
    for (int64_t r = 0; r < out; ++r) {
      float amax = 0.0f;
      for (int64_t k = 0; k < in; ++k) amax = std::max(amax, std::fabs(W[r * in + k]));
      const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
      scales_[static_cast<std::size_t>(r)] = s;
      for (int64_t k = 0; k < in; ++k)
        codes_[static_cast<std::size_t>(r * in + k)] = static_cast<int8_t>(std::lround(W[r * in + k] / s));
    }
    if (bias != nullptr) bias_.assign(bias, bias + out);
  }
  void forward(const float* x, int64_t m, float* y) const override {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t r = 0; r < out_; ++r) {
        double sum = bias_.empty() ? 0.0 : bias_[static_cast<std::size_t>(r)];
        for (int64_t k = 0; k < in_; ++k)
          sum += double(x[i * in_ + k]) * codes_[static_cast<std::size_t>(r * in_ + k)] *
                 scales_[static_cast<std::size_t>(r)];
        y[i * out_ + r] = static_cast<float>(sum);
      }
    }
  }
  int64_t in_features() const override { return in_; }
  int64_t out_features() const override { return out_; }
  std::string format() const override { return "toy8"; }
  std::string kernel_path() const override { return "toy:scalar:toy8_ref"; }
  std::size_t bytes_held() const override { return codes_.size() + 4 * (scales_.size() + bias_.size()); }

 private:
  int64_t out_, in_;
  std::vector<int8_t> codes_;
  std::vector<float> scales_, bias_;
};

// The row and the kernel: everything the format adds, once per process.
void register_toy8() {
  static const bool registered = [] {
    const quant::Format toy = quant::register_format(
        {quant::Format{}, "toy8", "toy8", 8.0, /*weight_only=*/true, /*quantizes_activations=*/false,
         /*emulatable=*/false, /*in_default_sweep=*/false, "", "a test's 8-bit rows, scalar product"});
    kernels::register_cpu_format(
        {toy,
         {{"scalar", "toy:scalar:toy8_ref", "the _ref loop"}},
         [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in, const std::string&,
            const float*) { return std::make_unique<Toy8Linear>(W, bias, out, in); }});
    return true;
  }();
  (void)registered;
}

struct CliRun {
  int exit_code = 0;
  std::string out, err;
};

// One command line through the CLI, in this process (where toy8 is registered).
CliRun qjoule(const std::vector<std::string>& command) {
  register_toy8();
  static char program[] = "qjoule";
  std::vector<std::string> args = command;
  std::vector<char*> argv{program};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  CliRun r;
  r.exit_code = qjoule::cli::run_cli(static_cast<int>(argv.size() - 1), argv.data());
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

fs::path fixtures() { return qjoule::test::fixtures_dir(); }

TEST(ToyFormat, TheRegistryKnowsItWhereItRuns) {
  register_toy8();
  const auto toy = quant::find_format("toy8");
  ASSERT_TRUE(toy.has_value());
  EXPECT_TRUE(kernels::runs_on(kernels::Backend::cpu, *toy));
  EXPECT_FALSE(kernels::runs_on(kernels::Backend::cuda, *toy));
  EXPECT_THAT(kernels::backend_format_names(kernels::Backend::cpu), HasSubstr("nf4, mxfp4, nvfp4, toy8"));
  EXPECT_EQ(kernels::default_sweep_precisions(kernels::Backend::cpu), "fp32,bf16,int8,w8,int4,nf4");
  const CliRun info = qjoule({"info", "--formats"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("toy8   8.000  weight-only cpu        a test's 8-bit rows"));
  EXPECT_THAT(info.out, HasSubstr("cpu  scalar       toy:scalar:toy8_ref"));
}

// Registration's own bad input: a name or run token taken, a row without a name or bits, a CPU row for a
// format the backend runs already or without its builder or kernels, a format value nobody registered.
TEST(ToyFormat, ABadRegistrationIsOneLineAndChangesNothing) {
  register_toy8();
  const std::size_t formats = quant::all_formats().size();
  quant::FormatTraits row{quant::Format{}, "toy8", "toy9", 8.0, true, false, false, false, "", "again"};
  EXPECT_EQ(error_of([&] { quant::register_format(row); }),
            "format 'toy8' (run token 'toy9'): the name or run token of format 'toy8' already; expected new ones");
  row.name = "toy9";
  row.run_token = "int8_w8a8";
  EXPECT_THAT(error_of([&] { quant::register_format(row); }), HasSubstr("of format 'int8' already"));
  row.run_token = "toy9";
  row.bits_per_weight = 0.0;
  EXPECT_EQ(error_of([&] { quant::register_format(row); }),
            "format 'toy9': expected a name, a run token and bits per weight > 0");
  EXPECT_EQ(quant::all_formats().size(), formats);
  EXPECT_THAT(error_of([] { (void)quant::traits(static_cast<quant::Format>(200)); }),
              HasSubstr("format #200: no such format"));

  const quant::Format toy = *quant::find_format("toy8");
  const auto build = [](const quant::FormatSpec&, const float* W, const float* bias, int64_t out, int64_t in,
                        const std::string&, const float*) { return std::make_unique<Toy8Linear>(W, bias, out, in); };
  EXPECT_EQ(error_of([&] {
              kernels::register_cpu_format({toy, {{"scalar", "toy:scalar:toy8_ref", ""}}, build});
            }),
            "format 'toy8': the CPU backend runs it already; expected a new one");
  EXPECT_EQ(error_of([&] {
              kernels::register_cpu_format({quant::Format::fp8, {{"scalar", "x", ""}}, nullptr});
            }),
            "format 'fp8': a CPU row needs the function that builds its Linear");
  EXPECT_EQ(error_of([&] {
              kernels::register_cpu_format({quant::Format::fp8, {}, build});
            }),
            "format 'fp8': a CPU row needs its kernels and their kernel paths");
  EXPECT_FALSE(kernels::runs_on(kernels::Backend::cpu, quant::Format::fp8));
}

TEST(ToyFormat, EvalRunsItsKernelOnAClassifier) {
  const CliRun r =
      qjoule({"eval", "--model", (fixtures() / "tiny-bert").string(), "--dataset",
              (fixtures() / "tiny-bert" / "dataset.tsv").string(), "--precision", "toy8", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("toy:scalar:toy8_ref"));
  EXPECT_THAT(r.out, HasSubstr("accuracy"));
}

TEST(ToyFormat, PplRunsItOnADecoder) {
  const fs::path text = qjoule::test::temp_dir("toy_format_ppl") / "text.txt";
  std::ofstream(text) << "the quick brown fox jumps over the lazy dog. the dog sleeps, the fox runs on.\n";
  const CliRun r = qjoule({"ppl", "--model", (fixtures() / "decoders" / "tiny-llama").string(), "--text", text.string(),
                           "--precision", "toy8", "--ctx", "16", "--threads", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("toy:scalar:toy8_ref"));
  EXPECT_THAT(r.out, HasSubstr("perplexity"));
}

TEST(ToyFormat, BenchRecordsItsRunsWithItsKernelPath) {
  const fs::path dir = qjoule::test::temp_dir("toy_format_bench");
  for (const char* v : {"QJOULE_POWERCAP_ROOT", "QJOULE_PERF_POWER_ROOT"}) ::setenv(v, (dir / "none").c_str(), 1);
  ::setenv("QJOULE_NVML_LIB", (dir / "none.so").c_str(), 1);
  const CliRun r = qjoule({"bench",
                           "--model",
                           (fixtures() / "tiny-bert").string(),
                           "--dataset",
                           (fixtures() / "tiny-bert" / "dataset.tsv").string(),
                           "--precisions",
                           "fp32,toy8",
                           "--batch",
                           "1",
                           "--seq",
                           "8",
                           "--threads",
                           "1",
                           "--warmup",
                           "0",
                           "--iters",
                           "1",
                           "--min-time",
                           "0",
                           "--idle",
                           "0",
                           "--out",
                           (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto records = qjoule::test::read_records(dir / "out" / "results.jsonl");
  ASSERT_EQ(records.size(), 2u);
  const auto& toy = records[1];
  EXPECT_EQ(toy["precision"], "toy8");
  EXPECT_EQ(toy["status"], "ok") << toy["error"];
  EXPECT_THAT(toy["run_name"].get<std::string>(), HasSubstr("_toy8_"));
  EXPECT_THAT(toy["kernel_paths"].dump(), HasSubstr("toy8 toy:scalar:toy8_ref"));
  EXPECT_FALSE(toy["accuracy"].is_null());
  EXPECT_FALSE(toy["fidelity_mean_kl"].is_null());
}

TEST(ToyFormat, WhatItDoesNotTakeIsOneLine) {
  const CliRun option = qjoule({"eval", "--model", (fixtures() / "tiny-bert").string(), "--dataset",
                                (fixtures() / "tiny-bert" / "dataset.tsv").string(), "--precision", "toy8:emulate"});
  EXPECT_EQ(option.exit_code, 1);
  EXPECT_THAT(option.err, HasSubstr("precision 'toy8:emulate': toy8 takes no options"));
  const CliRun gpu =
      qjoule({"ppl", "--model", (fixtures() / "decoders" / "tiny-llama").string(), "--text",
              (fixtures() / "tiny-bert" / "dataset.tsv").string(), "--precision", "toy8", "--device", "cuda"});
  EXPECT_EQ(gpu.exit_code, 1);
  EXPECT_EQ(std::count(gpu.err.begin(), gpu.err.end(), '\n'), 1) << gpu.err;
}

}  // namespace

// Sweep expansion (order, count, dedupe, one-at-a-time), sweep-file errors, CLI lists.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"

#include "qjoule/bench/sweep.h"
#include "qjoule/error.h"
#include "test_paths.h"

namespace qjoule::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using test::error_of;

std::vector<std::string> names(const std::vector<RunConfig>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(run_name(r));
  return out;
}

std::filesystem::path write_file(const std::string& dir, const std::string& text) {
  const auto path = test::temp_dir(dir) / "sweep.json";
  std::ofstream(path) << text;
  return path;
}

TEST(BenchSweep, NoSweptKeysIsTheDefaultsOnce) {
  EXPECT_THAT(names(expand_sweep(SweepSpec{})), ElementsAre("distilbert-base_cpu_fp32_s128_bs1_t1"));
}

TEST(BenchSweep, PrecisionVariesFastestWithFp32First) {
  SweepSpec spec;
  spec.swept = {{"batch", {"1", "8"}}, {"precision", {"int8", "fp32"}}};
  EXPECT_THAT(names(expand_sweep(spec)),
              ElementsAre("distilbert-base_cpu_fp32_s128_bs1_t1", "distilbert-base_cpu_int8_w8a8_s128_bs1_t1",
                          "distilbert-base_cpu_fp32_s128_bs8_t1", "distilbert-base_cpu_int8_w8a8_s128_bs8_t1"));
  // Given first, precision still varies fastest.
  spec.swept = {{"precision", {"fp32", "int8"}}, {"batch", {"1", "8"}}};
  EXPECT_THAT(names(expand_sweep(spec)),
              ElementsAre("distilbert-base_cpu_fp32_s128_bs1_t1", "distilbert-base_cpu_int8_w8a8_s128_bs1_t1",
                          "distilbert-base_cpu_fp32_s128_bs8_t1", "distilbert-base_cpu_int8_w8a8_s128_bs8_t1"));
}

TEST(BenchSweep, OtherKeysNestInTheOrderGivenLastFastest) {
  SweepSpec spec;
  spec.swept = {{"seq", {"64", "128"}}, {"batch", {"1", "8"}}};
  EXPECT_THAT(names(expand_sweep(spec)),
              ElementsAre("distilbert-base_cpu_fp32_s64_bs1_t1", "distilbert-base_cpu_fp32_s64_bs8_t1",
                          "distilbert-base_cpu_fp32_s128_bs1_t1", "distilbert-base_cpu_fp32_s128_bs8_t1"));
}

TEST(BenchSweep, CrossProductCountAndDefaults) {
  SweepSpec spec;
  spec.defaults.threads = 2;
  spec.defaults.model = "bert";
  spec.swept = {{"precision", {"fp32", "int8", "int4"}}, {"batch", {"1", "8"}}, {"seq", {"64", "128"}}};
  const auto runs = expand_sweep(spec);
  ASSERT_EQ(runs.size(), 12u);
  for (const auto& r : runs) {
    EXPECT_EQ(r.threads, 2);
    EXPECT_EQ(r.model, "bert");
  }
  // Every third run is a baseline, followed by its variants.
  for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].precision == "fp32", i % 3 == 0) << i;
}

TEST(BenchSweep, DuplicateConfigurationsAppearOnce) {
  SweepSpec spec;
  spec.swept = {{"precision", {"int4", "fp32", "int4:g128:sym", "int4:sym"}}, {"batch", {"1", "1"}}};
  EXPECT_THAT(names(expand_sweep(spec)),
              ElementsAre("distilbert-base_cpu_fp32_s128_bs1_t1", "distilbert-base_cpu_int4_g128_sym_s128_bs1_t1"));
}

TEST(BenchSweep, OneAtATime) {
  SweepSpec spec;
  spec.mode = SweepSpec::Mode::one_at_a_time;
  spec.defaults.batch = 1;
  spec.swept = {{"precision", {"fp32", "int8", "nf4"}}, {"batch", {"1", "8", "32"}}};
  EXPECT_THAT(names(expand_sweep(spec)),
              ElementsAre("distilbert-base_cpu_fp32_s128_bs1_t1", "distilbert-base_cpu_int8_w8a8_s128_bs1_t1",
                          "distilbert-base_cpu_nf4_s128_bs1_t1", "distilbert-base_cpu_fp32_s128_bs8_t1",
                          "distilbert-base_cpu_fp32_s128_bs32_t1"));
}

TEST(BenchSweep, BadSpecsFail) {
  SweepSpec spec;
  spec.swept = {{"batchsize", {"1"}}};
  EXPECT_THAT(error_of([&] { expand_sweep(spec); }), HasSubstr("unknown key 'batchsize'"));
  spec.swept = {{"batch", {}}};
  EXPECT_THAT(error_of([&] { expand_sweep(spec); }), HasSubstr("'batch' has no values"));
  spec.swept = {{"batch", {"1"}}, {"batch", {"8"}}};
  EXPECT_THAT(error_of([&] { expand_sweep(spec); }), HasSubstr("'batch' is given twice"));
  spec.swept = {{"precision", {"fp32"}}, {"seq", {"128", "x"}}};
  EXPECT_THAT(error_of([&] { expand_sweep(spec); }), HasSubstr("'x' is not a positive integer"));
  spec.swept = {{"threads", {"0"}}};
  EXPECT_THAT(error_of([&] { expand_sweep(spec); }), HasSubstr("threads 0: expected at least 1"));
}

TEST(BenchSweepFile, TheDocumentedExample) {
  const auto path = write_file("bench_sweep_example", R"({"defaults": {"batch": 1, "seq": 128, "threads": 2},
    "sweep": {"precision": ["fp32", "int8"], "batch": [1, 8]}, "mode": "cross_product"})");
  const auto spec = parse_sweep_file(path);
  EXPECT_EQ(spec.defaults.threads, 2);
  EXPECT_EQ(spec.mode, SweepSpec::Mode::cross_product);
  ASSERT_EQ(spec.swept.size(), 2u);
  EXPECT_EQ(spec.swept[0].first, "precision");
  EXPECT_THAT(spec.swept[1].second, ElementsAre("1", "8"));
  EXPECT_EQ(expand_sweep(spec).size(), 4u);
}

TEST(BenchSweepFile, KeepsTheOrderOfSweptKeys) {
  // Not alphabetical: seq before batch, as written.
  const auto path = write_file("bench_sweep_order", R"({"sweep": {"seq": [64, 128], "batch": [1, 8]},
    "mode": "one_at_a_time"})");
  const auto spec = parse_sweep_file(path);
  ASSERT_EQ(spec.swept.size(), 2u);
  EXPECT_EQ(spec.swept[0].first, "seq");
  EXPECT_EQ(spec.swept[1].first, "batch");
  EXPECT_EQ(spec.mode, SweepSpec::Mode::one_at_a_time);
}

TEST(BenchSweepFile, UnknownKeysNameFileKeyAndExpectedKeys) {
  auto path = write_file("bench_sweep_unknown_top", R"({"sweeps": {}})");
  auto message = error_of([&] { parse_sweep_file(path); });
  EXPECT_THAT(message, HasSubstr("sweep file '" + path.string() + "'"));
  EXPECT_THAT(message, HasSubstr("unknown key 'sweeps', expected one of: defaults, sweep, mode"));

  path = write_file("bench_sweep_unknown_default", R"({"defaults": {"bach": 1}})");
  message = error_of([&] { parse_sweep_file(path); });
  EXPECT_THAT(message, HasSubstr(path.string()));
  EXPECT_THAT(message,
              HasSubstr("unknown key 'defaults.bach', expected one of: model, device, precision, batch, seq, threads"));

  path = write_file("bench_sweep_unknown_swept", R"({"sweep": {"precisions": ["fp32"]}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("unknown key 'sweep.precisions'"));
}

TEST(BenchSweepFile, BatchZeroAndWrongTypes) {
  auto path = write_file("bench_sweep_zero", R"({"defaults": {"batch": 0}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("sweep file '" + path.string() + "': defaults.batch 0, expected at least 1"));
  path = write_file("bench_sweep_zero_swept", R"({"sweep": {"batch": [1, 0]}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("sweep.batch[1] 0, expected at least 1"));
  path = write_file("bench_sweep_negative", R"({"defaults": {"seq": -4}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("defaults.seq -4, expected at least 1"));

  path = write_file("bench_sweep_string_batch", R"({"defaults": {"batch": "8"}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("defaults.batch is a string (\"8\"), expected a positive integer"));
  path = write_file("bench_sweep_scalar_list", R"({"sweep": {"precision": "fp32"}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("sweep.precision is a string (\"fp32\"), expected an array of strings"));
  path = write_file("bench_sweep_number_in_strings", R"({"sweep": {"precision": ["fp32", 8]}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("sweep.precision[1] is a number (8), expected a string"));
  path = write_file("bench_sweep_empty_list", R"({"sweep": {"batch": []}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("sweep.batch is empty"));
  path = write_file("bench_sweep_mode", R"({"mode": "grid"})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("mode is a string (\"grid\"), expected \"cross_product\" or \"one_at_a_time\""));
  path = write_file("bench_sweep_array", R"([1, 2])");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("is an array, expected an object"));
}

TEST(BenchSweepFile, UnreadableOrInvalidJson) {
  auto path = write_file("bench_sweep_invalid", R"({"sweep": )");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }), HasSubstr("is not valid JSON: parse error"));
  path = write_file("bench_sweep_overflow", R"({"sweep": {"batch": [1E400]}})");
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("is not valid JSON: number overflow parsing '1E400'"));
  path = test::temp_dir("bench_sweep_missing") / "absent.json";
  EXPECT_THAT(error_of([&] { parse_sweep_file(path); }),
              HasSubstr("cannot read sweep file '" + path.string() + "': No such file or directory"));
}

TEST(BenchCliLists, SizeLists) {
  EXPECT_THAT(parse_size_list("--batch", "1,8"), ElementsAre(1u, 8u));
  EXPECT_THAT(parse_size_list("--batch", " 1 , 8 ,32"), ElementsAre(1u, 8u, 32u));
  EXPECT_THAT(parse_size_list("--seq", "128"), ElementsAre(128u));
  EXPECT_EQ(error_of([] { parse_size_list("--batch", "1,x"); }), "--batch '1,x': 'x' is not a positive integer");
  EXPECT_EQ(error_of([] { parse_size_list("--batch", "0"); }), "--batch 0: expected at least 1");
  EXPECT_EQ(error_of([] { parse_size_list("--batch", "-1"); }), "--batch '-1': '-1' is not a positive integer");
  EXPECT_THAT(error_of([] { parse_size_list("--batch", "1,,8"); }), HasSubstr("--batch '1,,8': empty item"));
  EXPECT_THAT(error_of([] { parse_size_list("--batch", ""); }), HasSubstr("--batch is empty"));
  EXPECT_THAT(error_of([] { parse_size_list("--batch", "99999999999999999999999"); }), HasSubstr("is too large"));
}

TEST(BenchCliLists, StringLists) {
  EXPECT_THAT(parse_string_list("--precisions", " fp32 , int8:sq0.5,int4:g64:asym "),
              ElementsAre("fp32", "int8:sq0.5", "int4:g64:asym"));
  EXPECT_THAT(error_of([] { parse_string_list("--precisions", "fp32,"); }),
              HasSubstr("--precisions 'fp32,': empty item"));
  EXPECT_THAT(error_of([] { parse_string_list("--precisions", "  "); }), HasSubstr("--precisions is empty"));
}

}  // namespace
}  // namespace qjoule::bench

// Run names: the token of each precision spec, defaults filled in, sanitizing, uniqueness; RunConfig JSON.
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"

#include "qjoule/bench/run_config.h"
#include "qjoule/error.h"

namespace qjoule::bench {
namespace {

using ::testing::HasSubstr;

using test::error_of;

TEST(BenchRunName, DefaultsAndTheBriefExample) {
  EXPECT_EQ(run_name(RunConfig{}), "distilbert-base_cpu_fp32_s128_bs1_t1");
  RunConfig c;
  c.precision = "int8";
  c.batch = 8;
  c.threads = 2;
  EXPECT_EQ(run_name(c), "distilbert-base_cpu_int8_w8a8_s128_bs8_t2");
}

TEST(BenchRunName, PrecisionTokens) {
  EXPECT_EQ(precision_token("fp32"), "fp32");
  EXPECT_EQ(precision_token("bf16"), "bf16");
  EXPECT_EQ(precision_token("fp16"), "fp16");
  EXPECT_EQ(precision_token("int8"), "int8_w8a8");
  EXPECT_EQ(precision_token("int8:sq0.5"), "int8_w8a8_sq0.5");
  EXPECT_EQ(precision_token("w8"), "w8a32");
  EXPECT_EQ(precision_token("int4"), "int4_g128_sym");
  EXPECT_EQ(precision_token("int4:g64:asym"), "int4_g64_asym");
  EXPECT_EQ(precision_token("int4:asym:g32"), "int4_g32_asym");
  EXPECT_EQ(precision_token("nf4"), "nf4");
  EXPECT_EQ(precision_token("nf4:dq"), "nf4_dq");
  // The current grammar names runs as the old spellings did, so a sweep resumes across the change.
  EXPECT_EQ(precision_token("int8:sq=0.5"), "int8_w8a8_sq0.5");
  EXPECT_EQ(precision_token("int4:g=64:asym"), "int4_g64_asym");
}

TEST(BenchRunName, DefaultsAreFilledSoEqualFormatsGetEqualNames) {
  EXPECT_EQ(precision_token("int4"), precision_token("int4:g128:sym"));
  EXPECT_EQ(precision_token("int4:g128"), precision_token("int4:sym"));
  EXPECT_NE(precision_token("int4"), precision_token("int4:asym"));
}

TEST(BenchRunName, EmulateAnywhereGoesLast) {
  EXPECT_EQ(precision_token("int8:emulate"), "int8_w8a8_emulated");
  EXPECT_EQ(precision_token("int8:emulate:sq0.5"), "int8_w8a8_sq0.5_emulated");
  EXPECT_EQ(precision_token("int8:sq0.5:emulate"), "int8_w8a8_sq0.5_emulated");
  EXPECT_EQ(precision_token("int4:emulate:g64"), "int4_g64_sym_emulated");
  EXPECT_EQ(precision_token("bf16:emulate"), "bf16_emulated");
}

TEST(BenchRunName, UnknownOptionsAreKeptSanitized) {
  EXPECT_EQ(precision_token("int8:foo_bar"), "int8_w8a8_foobar");
  EXPECT_EQ(precision_token("fp32:x/y"), "fp32_xy");
  EXPECT_EQ(precision_token("nf4:dq:zz"), "nf4_dq_zz");
  EXPECT_EQ(precision_token("int8::sq0.5"), "int8_w8a8_sq0.5");  // empty options are skipped
  EXPECT_EQ(precision_token("w8:dq"), "w8a32_dq");               // dq means something for nf4 only
  EXPECT_EQ(precision_token("mx_fp4"), "mxfp4");                 // an unknown format stays (sanitized)
}

TEST(BenchRunName, ModelPathsGiveTheirLastComponentSanitized) {
  EXPECT_EQ(model_token("distilbert-base"), "distilbert-base");
  EXPECT_EQ(model_token("/models/bert_base/"), "bertbase");
  EXPECT_EQ(model_token("../shared/models/sst2-distilbert"), "sst2-distilbert");
  EXPECT_EQ(model_token("org/model v1.2"), "modelv1.2");
  RunConfig c;
  c.model = "/data/ckpt/distilbert_sst2";
  c.device = "cuda:0";
  EXPECT_EQ(run_name(c), "distilbertsst2_cuda0_fp32_s128_bs1_t1");
}

TEST(BenchRunName, EmptyPartsFail) {
  EXPECT_THAT(error_of([] { precision_token(""); }), HasSubstr("precision '' has no format"));
  EXPECT_THAT(error_of([] { precision_token(":g64"); }), HasSubstr("precision ':g64' has no format"));
  EXPECT_THAT(error_of([] { model_token("/"); }), HasSubstr("model '/' gives no name"));
  RunConfig c;
  c.device = "__";
  EXPECT_THAT(error_of([&] { run_name(c); }), HasSubstr("device '__' gives no name"));
}

TEST(BenchRunName, DistinctConfigurationsGetDistinctNames) {
  std::set<std::string> names;
  std::size_t configs = 0;
  for (const char* precision : {"fp32", "bf16", "fp16", "int8", "int8:sq0.5", "int8:emulate", "w8", "int4", "int4:g64",
                                "int4:asym", "nf4", "nf4:dq"})
    for (std::size_t batch : {1, 8})
      for (std::size_t seq : {64, 128})
        for (int threads : {1, 2}) {
          RunConfig c;
          c.precision = precision;
          c.batch = batch;
          c.seq = seq;
          c.threads = threads;
          names.insert(run_name(c));
          ++configs;
        }
  EXPECT_EQ(names.size(), configs);
}

TEST(BenchRunConfigJson, RoundTripsAndKeepsDefaultsForMissingKeys) {
  RunConfig c;
  c.model = "bert";
  c.precision = "int4:g64";
  c.batch = 4;
  c.seq = 64;
  c.threads = 3;
  const auto back = run_config_from_json(to_json(c));
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_EQ(to_json(c).size(), kRunConfigKeys.size());

  const auto partial = run_config_from_json({{"batch", 8}});
  EXPECT_EQ(partial.batch, 8u);
  EXPECT_EQ(partial.seq, 128u);
  EXPECT_EQ(partial.precision, "fp32");
}

TEST(BenchRunConfigJson, BadInputsNameTheKey) {
  EXPECT_THAT(error_of([] {
                run_config_from_json({{"bach", 8}});
              }),
              HasSubstr("unknown key 'bach', expected one of: model, device, precision, batch, seq, threads"));
  EXPECT_THAT(error_of([] { run_config_from_json({{"batch", 0}}); }), HasSubstr("batch 0, expected at least 1"));
  EXPECT_THAT(error_of([] {
                run_config_from_json({{"seq", "128"}});
              }),
              HasSubstr("seq is a string (\"128\"), expected a positive integer"));
  EXPECT_THAT(error_of([] {
                run_config_from_json({{"threads", 1.5}});
              }),
              HasSubstr("threads is a number (1.5), expected a positive integer"));
  EXPECT_THAT(error_of([] {
                run_config_from_json({{"model", 3}});
              }),
              HasSubstr("model is a number (3), expected a string"));
  EXPECT_THAT(error_of([] { run_config_from_json(nlohmann::json::array()); }),
              HasSubstr("run config is an array, expected an object"));
}

}  // namespace
}  // namespace qjoule::bench

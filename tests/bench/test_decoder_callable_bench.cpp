// A caller's decoder timed in two phases (bench/decoder_callable_bench.h, what qjoule.bench_decoder and
// scripts/peers/ run): both phases' rates, each window's energy per token from a sensor of known power,
// the engine, the caller's quality labelled, a failed record of a peer that could not run, and every bad
// argument as one line.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"
#include "qjoule/bench/decoder_callable_bench.h"
#include "qjoule/energy/energy_meter.h"
#include "scripted_sensors.h"

namespace qjoule::bench {
namespace {

using ::testing::HasSubstr;

DecoderCallableRun peer_run() {
  DecoderCallableRun d;
  d.run.name = "peer-int4";
  d.run.precision = "peer-int4";
  d.run.engine = "peer 1.0";
  d.run.seq = 32;
  d.run.threads = 2;
  d.run.warmup = 1;
  d.run.min_iters = 3;
  d.run.min_time_s = 0.15;  // over 10 updates of a sensor the default 10 ms sampler reads: else no energy
  d.decode_tokens = 8;
  return d;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

TEST(DecoderCallableBench, BothPhasesTheirEnergyAndTheCallersFigures) {
  energy::SensorDiscovery found;
  found.sensors.push_back(std::make_unique<test::ScriptedSensor>("rapl:package-0", true, false, 40.0));
  energy::EnergyMeter meter(std::move(found));
  meter.start();
  DecoderCallableRun d = peer_run();
  d.quality = {{"lm_text", "test.txt"},       {"lm_ppl", 12.5},     {"lm_base_ppl", 12.0},   {"lm_delta_ppl", 0.5},
               {"lm_delta_ppl_stderr", 0.05}, {"lm_kl_mean", 0.02}, {"lm_kl_stderr", 0.001}, {"lm_ctx", 64}};
  d.notes = {"decode: the peer's own cache cut back"};
  check_decoder_callable_run(d);
  const auto t = time_decoder_callable([] { sleep_ms(2); }, [] { sleep_ms(4); }, d, meter);
  const RunRecord r = decoder_callable_run_record(d, t);
  EXPECT_EQ(r.engine, "peer 1.0");
  EXPECT_EQ(r.prefill_tokens, 32u);
  EXPECT_EQ(r.decode_tokens, 8u);
  EXPECT_GE(*r.decode_iters, 3u);
  EXPECT_GT(*r.prefill_tokens_per_s_mean, 0.0);
  EXPECT_LE(*r.prefill_tokens_per_s_mean, 32 / 0.002 * 1.01);  // sleeps only ever run long
  EXPECT_LE(*r.decode_tokens_per_s_mean, 8 / 0.004 * 1.01);
  EXPECT_GE(*r.decode_ms_per_token_mean, 0.5);
  // 40 W over each window: decode's mJ per token is 40 W × the mean ms per token, within the sampling.
  ASSERT_TRUE(r.decode_mj_per_token.has_value()) << r.decode_energy_unavailable;
  EXPECT_NEAR(*r.decode_mj_per_token, 40.0 * *r.decode_ms_per_token_mean, 0.25 * 40.0 * *r.decode_ms_per_token_mean);
  ASSERT_TRUE(r.energy_j.has_value()) << r.energy_unavailable;
  if (t.prefill.peak_rss_bytes && t.decode.peak_rss_bytes) {  // the run's high-water mark: both phases'
    EXPECT_EQ(r.peak_rss_bytes, std::max(*t.prefill.peak_rss_bytes, *t.decode.peak_rss_bytes));
  }
  EXPECT_EQ(r.lm_ppl, 12.5);
  EXPECT_EQ(r.lm_delta_ppl_stderr, 0.05);
  EXPECT_EQ(r.lm_ctx, 64u);
  EXPECT_THAT(r.notes, ::testing::Contains(HasSubstr("lm_*: supplied by the caller (peer 1.0)")));
  EXPECT_THAT(r.notes, ::testing::Contains("caller: decode: the peer's own cache cut back"));
}

TEST(DecoderCallableBench, APeerThatCouldNotRunIsAFailedRecord) {
  const RunRecord r = failed_callable_run_record(peer_run().run, "pip install failed", 8);
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.error, "pip install failed");
  EXPECT_EQ(r.engine, "peer 1.0");
  EXPECT_EQ(r.decode_tokens, 8u);
  EXPECT_FALSE(r.energy_j.has_value());
  EXPECT_FALSE(r.energy_unavailable.empty());
  EXPECT_EQ(r.config.threads, 2);
  CallableRun unsaid = peer_run().run;
  unsaid.threads = 0;  // not given: the machine's cores, said so, as an ok record of the caller's
  const RunRecord u = failed_callable_run_record(unsaid, "x", 8);
  EXPECT_EQ(u.config.threads, threads_of(unsaid));
  EXPECT_THAT(u.notes, ::testing::Contains(HasSubstr("threads not given by the caller")));
}

TEST(DecoderCallableBench, BadArgumentsAreOneLine) {
  const auto message = [](auto change) {
    DecoderCallableRun d = peer_run();
    change(d);
    return test::error_of([&] { check_decoder_callable_run(d); });
  };
  EXPECT_THAT(message([](DecoderCallableRun& d) { d.run.batch = 2; }), HasSubstr("batch 2 is not supported"));
  EXPECT_THAT(message([](DecoderCallableRun& d) { d.decode_tokens = 0; }), HasSubstr("decode_tokens is 0"));
  EXPECT_THAT(message([](DecoderCallableRun& d) { d.run.engine.clear(); }), HasSubstr("engine is empty"));
  EXPECT_THAT(message([](DecoderCallableRun& d) { d.quality = 3; }), HasSubstr("quality is 3, expected a dict"));
  EXPECT_THAT(message([](DecoderCallableRun& d) {
                d.quality = {{"ppl", 1.0}};
              }),
              HasSubstr("quality key 'ppl' is not one qjoule records"));
  EXPECT_THAT(message([](DecoderCallableRun& d) {
                d.quality = {{"lm_text", 1}};
              }),
              HasSubstr("quality lm_text is 1, expected a string"));
  EXPECT_THAT(message([](DecoderCallableRun& d) {
                d.quality = {{"lm_stride", -4}};
              }),
              HasSubstr("quality lm_stride is -4, expected a whole number >= 0"));
  EXPECT_THAT(message([](DecoderCallableRun& d) {
                d.quality = {{"lm_kl_mean", "x"}};
              }),
              HasSubstr("quality lm_kl_mean is \"x\", expected a finite number"));
  EXPECT_THAT(message([](DecoderCallableRun& d) { d.run.name.clear(); }), HasSubstr("name is empty"));
}

}  // namespace
}  // namespace qjoule::bench

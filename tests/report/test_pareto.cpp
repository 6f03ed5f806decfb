// The Pareto frontier: the bare computation (dominance, ties, non-finite points) and the choice of
// runs and axes over benchmark records (failed and emulated runs out, latency when no energy).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/report/pareto.h"
#include "qjoule/report/record_pareto.h"

namespace qjoule::report {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ReportPareto, KeepsOnlyUndominatedPointsCheapestFirst) {
  // cost, quality: B dominates D (cheaper and better); C is dearer but best; A is cheapest.
  const std::vector<ParetoPoint> points = {{3.0, 0.90}, {1.0, 0.80}, {5.0, 0.95}, {4.0, 0.85}, {2.0, 0.88}};
  EXPECT_THAT(pareto_frontier(points), ElementsAre(1, 4, 0, 2));
}

TEST(ReportPareto, EqualCostKeepsTheBetterEqualQualityKeepsTheCheaper) {
  const std::vector<ParetoPoint> points = {{1.0, 0.80}, {1.0, 0.85}, {2.0, 0.85}, {3.0, 0.90}};
  EXPECT_THAT(pareto_frontier(points), ElementsAre(1, 3));
}

TEST(ReportPareto, ExactTiesAreAllKept) {
  const std::vector<ParetoPoint> points = {{2.0, 0.9}, {1.0, 0.8}, {2.0, 0.9}, {1.0, 0.8}};
  EXPECT_THAT(pareto_frontier(points), ElementsAre(1, 3, 0, 2));
}

TEST(ReportPareto, NonFinitePointsAreNeverOnTheFrontier) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<ParetoPoint> points = {{nan, 1.0}, {1.0, inf}, {2.0, 0.5}, {-inf, 0.1}};
  EXPECT_THAT(pareto_frontier(points), ElementsAre(2));
  EXPECT_THAT(pareto_frontier({}), IsEmpty());
}

TEST(ReportPareto, NegativeNetEnergyIsJustTheCheapest) {
  EXPECT_THAT(pareto_frontier({{0.5, 0.9}, {-0.01, 0.7}}), ElementsAre(1, 0));
}

bench::RunRecord run(const std::string& precision, std::size_t batch, double p50, std::optional<double> j,
                     std::optional<double> accuracy, std::optional<double> agreement = std::nullopt) {
  bench::RunRecord r;
  r.config.precision = precision;
  r.config.batch = batch;
  r.run_name = bench::run_name(r.config);
  r.latency = bench::LatencyStats{10, p50, 0, p50, p50, p50, p50, p50};
  r.energy_j_per_inference = j;
  if (!j) r.energy_unavailable = "no energy sensor";
  r.accuracy = accuracy;
  r.fidelity_top1_agreement = agreement;
  return r;
}

TEST(ReportRecordPareto, EnergyAgainstAccuracyWithoutFailedOrEmulatedRuns) {
  auto emulated = run("int4:emulate", 1, 1.0, 0.01, 0.99);  // would dominate everything
  emulated.not_representative = true;
  auto failed = run("nf4", 1, 1.0, 0.01, 0.99);
  failed.status = "failed";
  const std::vector<bench::RunRecord> records = {run("fp32", 1, 10, 0.50, 0.91),
                                                 run("int8", 1, 4, 0.20, 0.90),
                                                 run("int4", 1, 3, 0.25, 0.89),
                                                 run("w8", 1, 8, std::nullopt, 0.95),
                                                 emulated,
                                                 failed};
  const auto p = pareto_of_records(records);
  EXPECT_TRUE(p.cost_is_energy);
  EXPECT_TRUE(p.quality_is_accuracy);
  EXPECT_THAT(p.frontier, ElementsAre(1, 0));  // int8 (cheapest), fp32 (best); int4 is dominated by int8
  EXPECT_THAT(p.candidates, ElementsAre(0, 1, 2));
  EXPECT_EQ(p.left_out.size(), 3u);  // w8 (no energy), emulated, failed
  EXPECT_DOUBLE_EQ(p.quality[0], 91.0);
}

TEST(ReportRecordPareto, WithoutEnergyLatencyAndWithoutLabelsAgreementStandIn) {
  const std::vector<bench::RunRecord> records = {run("fp32", 1, 10, std::nullopt, std::nullopt),
                                                 run("int8", 1, 4, std::nullopt, std::nullopt, 0.97),
                                                 run("nf4", 1, 6, std::nullopt, std::nullopt, 0.96)};
  const auto p = pareto_of_records(records);
  EXPECT_FALSE(p.cost_is_energy);
  EXPECT_FALSE(p.quality_is_accuracy);
  EXPECT_EQ(p.cost_label, "p50 latency per batch (ms)");
  EXPECT_THAT(p.frontier, ElementsAre(1, 0));  // FP32 agrees with itself (100%) without a recorded agreement
}

// A decoder sweep: perplexity (lower is better) against decode tok/s (higher is better), and against
// decode mJ/token only where some run has it; an encoder run makes it no decoder sweep.
TEST(ReportDecoderPareto, PerplexityAgainstDecodeSpeedAndEnergy) {
  const auto decoder = [](const std::string& precision, double tok_s, std::optional<double> ppl,
                          std::optional<double> mj) {
    bench::RunRecord r;
    r.config.precision = precision;
    r.run_name = precision;
    r.decode_tokens = 16;
    r.decode_tokens_per_s_mean = tok_s;
    r.lm_ppl = ppl;
    r.lm_text = "t.txt";
    r.decode_mj_per_token = mj;
    if (!mj) r.decode_energy_unavailable = "no sensor";
    return r;
  };
  std::vector<bench::RunRecord> records = {decoder("fp32", 10, 7.0, 50.0), decoder("int8", 30, 7.1, 20.0),
                                           decoder("int4", 50, 7.5, 12.0), decoder("nf4", 45, 7.6, 13.0),
                                           decoder("w8", 28, std::nullopt, std::nullopt)};
  ASSERT_TRUE(is_decoder_sweep(records));
  const auto charts = decoder_paretos(records);
  ASSERT_EQ(charts.size(), 2u);
  EXPECT_EQ(charts[0].x_label, "decode tokens/s");
  EXPECT_EQ(charts[0].y_label, "perplexity on t.txt");
  EXPECT_THAT(charts[0].frontier, ElementsAre(2, 1, 0));  // int4 fastest, int8, fp32 best; nf4 dominated by int4
  EXPECT_THAT(charts[0].left_out, ElementsAre("w8: no perplexity (no --text)"));
  EXPECT_THAT(charts[1].frontier, ElementsAre(2, 1, 0));
  EXPECT_THAT(charts[1].left_out, ElementsAre("w8: decode energy unavailable"));
  for (auto& r : records) r.decode_mj_per_token.reset();
  EXPECT_EQ(decoder_paretos(records)[1].unavailable, "no run has decode energy: no sensor");
  bench::RunRecord encoder;
  encoder.run_name = "bert";
  records.push_back(encoder);
  EXPECT_FALSE(is_decoder_sweep(records));
}

}  // namespace
}  // namespace qjoule::report

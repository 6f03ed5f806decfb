// The roofline chart's roofs come from the records' machine limits: a flat roof per compute peak that
// was measured (the AMX tiles' included), none for a peak that is null.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qjoule/report/roofline_chart.h"

namespace qjoule::report {
namespace {

std::vector<std::string> dataset_labels(const ReportChart& chart) {
  std::vector<std::string> labels;
  for (const auto& d : chart.config["data"]["datasets"]) labels.push_back(d["label"].get<std::string>());
  return labels;
}

TEST(RooflineChart, DrawsAFlatRoofPerMeasuredPeakTheAmxTilesIncluded) {
  bench::RunRecord r;
  r.status = "ok";
  r.run_name = "bf16 on tiles";
  r.config.precision = "bf16";
  r.roof_flops_per_token = 8.9e7;
  r.roof_bytes_per_token = 1.4e6;
  r.roof_gflops = 2254.0;
  r.environment["machine_limits"] = {{"threads", 16},           {"read_gb_per_s", 108.6}, {"fp32_gflops", 1381.5},
                                     {"bf16_gflops", 703.6},    {"int8_gops", 5572.6},    {"amx_bf16_gflops", 16097.6},
                                     {"amx_int8_gops", nullptr}};
  const auto labels = dataset_labels(roofline_chart({r}));
  EXPECT_THAT(labels, ::testing::Contains("AMX bf16 peak 16098"));
  EXPECT_THAT(labels, ::testing::Contains("bf16 dot peak 704"));
  EXPECT_THAT(labels, ::testing::Contains("memory read 108.6 GB/s"));
  for (const auto& l : labels) EXPECT_EQ(l.find("AMX int8"), std::string::npos) << "a null peak drew: " << l;
}

}  // namespace
}  // namespace qjoule::report

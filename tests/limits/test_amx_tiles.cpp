// The AMX tile peaks: measured where the CPU has AMX and Linux grants the tile state, else absent with
// the reason; the tile loops themselves run only there (a CPU without AMX skips them, saying so).
#include <gtest/gtest.h>

#include "limits/amx_tiles.h"
#include "qjoule/limits/cpu_peak.h"
#include "qjoule/limits/machine_limits.h"

namespace qjoule::limits {
namespace {

TEST(AmxTiles, TheLoopsRunOnTilesWhereLinuxGrantsThem) {
  if (!amx::has_tile()) GTEST_SKIP() << "this CPU has no AMX tiles (CPUID 7 EDX bit 24)";
  const std::string refused = amx::request_tile_permission();
  if (!refused.empty()) GTEST_SKIP() << refused;
  if (amx::has_bf16()) amx::bf16_loop(1000);
  if (amx::has_int8()) amx::int8_loop(1000);
  amx::bf16_loop(0);  // nothing to do: returns without touching the tiles
}

TEST(AmxTiles, ThePeaksArePresentWithAmxAndOtherwiseAbsentWithTheReason) {
  const CpuPeak& peak = measured_peak(1);
  if (amx::has_tile() && amx::request_tile_permission().empty()) {
    EXPECT_EQ(peak.amx, "");
    if (amx::has_bf16()) {
      EXPECT_GT(peak.amx_bf16_gflops.value_or(0.0), 0.0);
    }
    if (amx::has_int8()) {
      EXPECT_GT(peak.amx_int8_gops.value_or(0.0), 0.0);
    }
    return;
  }
  EXPECT_FALSE(peak.amx_bf16_gflops);
  EXPECT_FALSE(peak.amx_int8_gops);
  if (!amx::has_tile()) {
    EXPECT_EQ(peak.amx, "");
  } else {
    EXPECT_NE(peak.amx.find("their peak not measured"), std::string::npos) << peak.amx;
  }
}

}  // namespace
}  // namespace qjoule::limits

// Parsing external-meter lines `timestamp_s,watts`.
#include <gtest/gtest.h>

#include "energy/power_line.h"

namespace qjoule::energy {
namespace {

TEST(EnergyPowerLine, ParsesTimestampAndWatts) {
  PowerLine line;
  ASSERT_EQ(parse_power_line("1700000000.25,42.5", line), PowerLineKind::sample);
  EXPECT_DOUBLE_EQ(line.timestamp_s, 1700000000.25);
  EXPECT_DOUBLE_EQ(line.watts, 42.5);
  ASSERT_EQ(parse_power_line("  1700000001 , 7\r", line), PowerLineKind::sample);
  EXPECT_DOUBLE_EQ(line.watts, 7.0);
}

TEST(EnergyPowerLine, SkipsBlankLinesAndComments) {
  PowerLine line;
  EXPECT_EQ(parse_power_line("", line), PowerLineKind::skip);
  EXPECT_EQ(parse_power_line("   ", line), PowerLineKind::skip);
  EXPECT_EQ(parse_power_line("# meter v2", line), PowerLineKind::skip);
}

TEST(EnergyPowerLine, RejectsWhatIsNotTimestampCommaWatts) {
  PowerLine line;
  EXPECT_EQ(parse_power_line("timestamp_s,watts", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("1700000000", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("1700000000,abc", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("1700000000,-3", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("1700000000,3,4", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("-5,3", line), PowerLineKind::malformed);
  EXPECT_EQ(parse_power_line("1700000000,inf", line), PowerLineKind::malformed);
}

}  // namespace
}  // namespace qjoule::energy

// cached_machine_limits: the limits where they stand without measuring, nothing otherwise.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "qjoule/limits/limits_cache.h"
#include "test_paths.h"

namespace qjoule::limits {
namespace {

TEST(LimitsCache, CachedLimitsAreReadWhereTheyStandAndNeverMeasured) {
  const auto dir = test::temp_dir("limits_cache_read_only");
  ::setenv("XDG_CACHE_HOME", (dir / "cache").string().c_str(), 1);
  ::unsetenv("QJOULE_LIMITS_FILE");
  EXPECT_FALSE(cached_machine_limits(1));  // none yet
  EXPECT_FALSE(std::filesystem::exists(limits_cache_file(1))) << "nothing measured, nothing written";
  std::filesystem::create_directories(limits_cache_file(1).parent_path());
  std::ofstream(limits_cache_file(1)) << "{ not json";
  EXPECT_FALSE(cached_machine_limits(1));           // unreadable: as if there were none
  const CachedLimits measured = machine_limits(1);  // measured (the test support says: uncontended), written
  ASSERT_FALSE(measured.from_cache);
  const auto read = cached_machine_limits(1);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->fp32_gflops, measured.limits.fp32_gflops);
  EXPECT_EQ(read->measured_at, measured.limits.measured_at);
  EXPECT_FALSE(cached_machine_limits(2)) << "another thread count's";
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace qjoule::limits

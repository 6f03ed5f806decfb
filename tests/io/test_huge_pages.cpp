// io::HugePageAllocator: large allocations start on a 2 MiB boundary and their whole 2 MiB pages are
// advised for transparent huge pages before they are touched (the VMA says THPeligible where the kernel's
// mode allows it); small ones are plain; the mode is read from sysfs, a file without one is one line.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "qjoule/io/huge_pages.h"

namespace qjoule::io {
namespace {

// The "THPeligible:" value of the /proc/self/smaps mapping that holds `p`, or -1 where none says.
int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(' ') > line.find('-')) {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::stoi(line.substr(12));
    }
  }
  return -1;
}

TEST(HugePages, ALargeVectorStartsOnA2MiBPageAdvisedBeforeItsFirstTouch) {
  HugePageVector<std::uint16_t> v(3 * kHugePageBytes / sizeof(std::uint16_t) + 5, 7);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % kHugePageBytes, 0u);
  EXPECT_EQ(v.front(), 7);
  EXPECT_EQ(v.back(), 7);
  const std::string mode = transparent_huge_pages_mode();
  if (mode != "always" && mode != "madvise") GTEST_SKIP() << "transparent huge pages are '" << mode << "' here";
  const int eligible = thp_eligible(v.data());
  if (eligible < 0) GTEST_SKIP() << "this kernel's /proc/self/smaps has no THPeligible field";
  EXPECT_EQ(eligible, 1);
}

TEST(HugePages, SmallVectorsArePlainAndARangeWithoutAWholePageIsNotAdvised) {
  HugePageVector<float> small(1000, 1.5f);
  EXPECT_EQ(small[999], 1.5f);
  EXPECT_FALSE(advise_huge_pages(nullptr, 0));
  EXPECT_FALSE(advise_huge_pages(small.data(), small.size() * sizeof(float)));
  const float* buffer = small.data();
  HugePageVector<float> moved = std::move(small);  // the allocator is stateless: moves keep the buffer
  EXPECT_EQ(moved.data(), buffer);
  EXPECT_EQ(moved.size(), 1000u);
  HugePageVector<std::uint8_t> large(kHugePageBytes);
  const std::uint8_t* mapped = large.data();
  HugePageVector<std::uint8_t> taken = std::move(large);
  EXPECT_EQ(taken.data(), mapped);
}

TEST(HugePages, TheModeIsTheBracketedWordOrSaysWhyNot) {
  const auto dir = std::filesystem::temp_directory_path() / ("qjoule_thp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& text) {
    std::ofstream(dir / "enabled") << text;
    return transparent_huge_pages_mode((dir / "enabled").string());
  };
  EXPECT_EQ(write("always [madvise] never\n"), "madvise");
  EXPECT_EQ(write("[always] madvise never\n"), "always");
  EXPECT_EQ(write("madvise\n"),
            "unavailable: " + (dir / "enabled").string() + " reads 'madvise', expected the mode in brackets");
  EXPECT_EQ(transparent_huge_pages_mode((dir / "none").string()),
            "unavailable: " + (dir / "none").string() + " is not readable");
  std::filesystem::remove_all(dir);
  const std::string here = transparent_huge_pages_mode();
  EXPECT_TRUE(here == "always" || here == "madvise" || here == "never" || here.rfind("unavailable: ", 0) == 0) << here;
}

}  // namespace
}  // namespace qjoule::io

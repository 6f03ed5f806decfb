// A fake powercap tree (the layout of /sys/class/powercap) whose energy_uj counters a driver thread
// advances at known wattages, wrapping at max_energy_range_uj like the real counters.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace qjoule::test {

struct FakeZone {
  std::string dir;   // "intel-rapl:0", "intel-rapl:0:1"
  std::string name;  // "package-0", "core", "dram", "psys"
  double watts = 0.0;
  std::uint64_t range_uj = 262143328850ULL;  // max_energy_range_uj ("" = do not write the file)
  std::uint64_t start_uj = 0;
  bool write_range = true;
};

class FakePowercap {
 public:
  // The tree lives in a fresh directory named after `name`, on tmpfs (/dev/shm) where there is one
  // so that the driver thread's many small writes are cheap; it is removed again on destruction.
  explicit FakePowercap(const std::string& name);
  ~FakePowercap();
  FakePowercap(const FakePowercap&) = delete;
  FakePowercap& operator=(const FakePowercap&) = delete;

  void add_zone(const FakeZone& zone);  // writes name, max_energy_range_uj and energy_uj
  void start(std::chrono::microseconds period = std::chrono::milliseconds(1));
  void stop();
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path energy_file(const std::string& dir) const { return root_ / dir / "energy_uj"; }
  std::uint64_t writes() const { return writes_.load(); }
  // The longest time between two writes since start(): a counter read at any moment is at most this
  // stale, so a window's energy may be off by watts × this (a host that stalls the driver thread).
  double max_write_gap_s() const { return max_gap_s_.load(); }

 private:
  void write_all(double elapsed_s);
  std::filesystem::path base_;  // removed on destruction
  std::filesystem::path root_;
  std::vector<FakeZone> zones_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<double> max_gap_s_{0.0};
};

}  // namespace qjoule::test

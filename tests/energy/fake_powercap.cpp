#include "fake_powercap.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <stdexcept>

#include "test_paths.h"

namespace qjoule::test {

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  // Write a sibling, then rename over the target: a reader never sees a half-written number.
  const std::string tmp = path.string() + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot write " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot rename " + tmp);
}

std::filesystem::path fast_base(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) {
    auto dir = std::filesystem::path("/dev/shm") / ("qjoule-test-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir);
    return dir;
  }
  return temp_dir(name);
}

}  // namespace

FakePowercap::FakePowercap(const std::string& name) : base_(fast_base(name)), root_(base_ / "powercap") {
  std::filesystem::create_directories(root_);
}

FakePowercap::~FakePowercap() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(base_, ec);
}

void FakePowercap::add_zone(const FakeZone& zone) {
  const auto dir = root_ / zone.dir;
  std::filesystem::create_directories(dir);
  write_file(dir / "name", zone.name + "\n");
  if (zone.write_range) write_file(dir / "max_energy_range_uj", std::to_string(zone.range_uj) + "\n");
  write_file(dir / "energy_uj", std::to_string(zone.start_uj % zone.range_uj) + "\n");
  zones_.push_back(zone);
}

void FakePowercap::write_all(double elapsed_s) {
  for (const FakeZone& zone : zones_) {
    const auto energy = static_cast<std::uint64_t>(std::llround(zone.watts * elapsed_s * 1e6));
    write_file(root_ / zone.dir / "energy_uj", std::to_string((zone.start_uj + energy) % zone.range_uj) + "\n");
  }
  ++writes_;
}

void FakePowercap::start(std::chrono::microseconds period) {
  stop_ = false;
  const auto origin = std::chrono::steady_clock::now();
  max_gap_s_ = 0.0;
  thread_ = std::thread([this, origin, period] {
    auto next = origin;
    auto last = origin;
    while (!stop_.load()) {
      const auto now = std::chrono::steady_clock::now();
      write_all(std::chrono::duration<double>(now - origin).count());
      const double gap = std::chrono::duration<double>(std::chrono::steady_clock::now() - last).count();
      if (gap > max_gap_s_.load()) max_gap_s_ = gap;
      last = std::chrono::steady_clock::now();
      next += period;
      if (next < now) next = now;
      std::this_thread::sleep_until(next);
    }
  });
}

void FakePowercap::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

}  // namespace qjoule::test

// ExternalMeterSensor: whole-system power from a wall meter, read as CSV lines `timestamp_s,watts`
// from a file that grows (`file:PATH`) or from a command's standard output (`cmd:COMMAND`).
// Timestamps are Unix time; readings are released to the sampler once the clock has passed them.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qjoule/energy/sensor.h"

namespace qjoule::energy {

class ExternalMeterSensor final : public Sensor {
 public:
  // `spec` is "file:PATH" or "cmd:COMMAND". Throws qjoule::Error when the form is unknown, the
  // file cannot be opened or the command cannot be started.
  static std::unique_ptr<ExternalMeterSensor> open(const std::string& spec, double max_gap_s);
  ~ExternalMeterSensor() override;

  const SensorInfo& info() const noexcept override { return info_; }
  std::size_t read(std::int64_t now_ns, std::span<SensorReading> out) noexcept override;
  std::string describe_error(int error_code) const override;
  std::vector<std::string> problems() const override;

 private:
  ExternalMeterSensor() = default;
  void take_line(const char* begin, std::size_t size) noexcept;

  struct Pending {
    std::int64_t time_ns;
    double watts;
  };

  SensorInfo info_;
  std::string spec_;
  int fd_ = -1;
  pid_t child_ = -1;
  bool eof_ = false;
  std::int64_t realtime_minus_monotonic_ns_ = 0;

  std::array<char, 65536> line_buffer_{};
  std::size_t line_length_ = 0;
  bool discarding_long_line_ = false;

  std::vector<Pending> pending_;  // ring, sized at open()
  std::size_t pending_head_ = 0;
  std::size_t pending_count_ = 0;
  std::int64_t last_time_ns_ = 0;

  // Written by the sampler thread, read by problems() from others.
  std::uint64_t lines_ = 0;
  bool header_allowed_ = true;
  std::atomic<std::uint64_t> samples_{0};
  std::atomic<std::uint64_t> malformed_{0};
  std::atomic<std::uint64_t> out_of_order_{0};
  std::atomic<std::uint64_t> overflowed_{0};
  std::atomic<int> read_error_{0};
  std::atomic<bool> command_closed_{false};
  mutable std::mutex first_malformed_mutex_;
  std::uint64_t first_malformed_line_ = 0;
  std::array<char, 96> first_malformed_text_{};

  void note_malformed(const char* text, std::size_t size) noexcept;
};

}  // namespace qjoule::energy

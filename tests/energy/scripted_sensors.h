// In-test sensors with known behaviour, for sampler and meter tests that need exact truths.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "qjoule/energy/sensor.h"

namespace qjoule::test {

// A polled sensor drawing `watts` (changeable at any time): its counter is the exact integral of
// the power over the times the sampler passes in, in `counter_unit_j` units, wrapping at
// `counter_range`.
class ScriptedSensor final : public energy::Sensor {
 public:
  explicit ScriptedSensor(std::string id, bool counter = true, bool power = false, double initial_watts = 50.0)
      : watts(initial_watts) {
    info_.id = std::move(id);
    info_.source = "test";
    info_.description = "scripted test sensor";
    info_.scope = energy::SensorScope::cpu_package;
    info_.has_counter = counter;
    info_.counter_unit_j = 1e-6;
    info_.has_power = power;
    info_.power_method = "scripted";
    info_.nominal_update_period_s = 0.0;
  }
  energy::SensorInfo& mutable_info() { return info_; }
  const energy::SensorInfo& info() const noexcept override { return info_; }

  std::size_t read(std::int64_t now_ns, std::span<energy::SensorReading> out) noexcept override {
    if (reads_.fetch_add(1) == 0) first_reader = std::this_thread::get_id();
    energy::SensorReading& r = out[0];
    r = energy::SensorReading{};
    r.time_ns = now_ns;
    const double w = watts.load();
    if (last_ns_ != 0) energy_units_ += w * static_cast<double>(now_ns - last_ns_) / 1e9 / info_.counter_unit_j;
    last_ns_ = now_ns;
    const long n = reads_.load();
    if (fail_every > 0 && n % fail_every == 0) {
      r.ok = false;
      r.error_code = 5;  // EIO
      return 1;
    }
    if (info_.has_counter) {
      auto units = start_units + static_cast<std::uint64_t>(std::llround(energy_units_));
      if (info_.counter_range > 0) units %= info_.counter_range;
      r.counter = units;
      r.has_counter = true;
    }
    if (info_.has_power) {
      r.power_w = w;
      r.has_power = true;
    }
    return 1;
  }
  long reads() const { return reads_.load(); }

  std::atomic<double> watts;
  std::uint64_t start_units = 0;
  long fail_every = 0;  // every Nth read fails (0: never)
  std::thread::id first_reader;

 private:
  energy::SensorInfo info_;
  std::atomic<long> reads_{0};
  std::int64_t last_ns_ = 0;
  double energy_units_ = 0.0;
};

// A self-timed sensor (like a wall meter) that releases scripted readings once their time passed.
class ScriptedMeter final : public energy::Sensor {
 public:
  struct Point {
    std::int64_t time_ns;
    double watts;
  };
  explicit ScriptedMeter(std::vector<Point> points, double max_gap_s = 0.05) : points_(std::move(points)) {
    info_.id = "meter:test";
    info_.source = "test";
    info_.description = "scripted meter";
    info_.scope = energy::SensorScope::system;
    info_.has_power = true;
    info_.power_method = "scripted";
    info_.self_timed = true;
    info_.max_gap_s = max_gap_s;
    info_.counts_in_total = false;
  }
  const energy::SensorInfo& info() const noexcept override { return info_; }
  std::size_t read(std::int64_t now_ns, std::span<energy::SensorReading> out) noexcept override {
    std::size_t n = 0;
    while (next_ < points_.size() && points_[next_].time_ns <= now_ns && n < out.size()) {
      energy::SensorReading& r = out[n++];
      r = energy::SensorReading{};
      r.time_ns = points_[next_].time_ns;
      r.power_w = points_[next_].watts;
      r.has_power = true;
      ++next_;
    }
    return n;
  }

 private:
  energy::SensorInfo info_;
  std::vector<Point> points_;
  std::size_t next_ = 0;
};

}  // namespace qjoule::test

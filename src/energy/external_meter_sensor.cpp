#include "energy/external_meter_sensor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "energy/child_process.h"
#include "energy/power_line.h"
#include "energy/text_file.h"
#include "qjoule/error.h"

namespace qjoule::energy {

namespace {

constexpr std::size_t kPendingCapacity = 16384;

std::int64_t realtime_minus_monotonic_ns() {
  using namespace std::chrono;
  const auto mono_before = steady_clock::now().time_since_epoch();
  const auto real = system_clock::now().time_since_epoch();
  const auto mono_after = steady_clock::now().time_since_epoch();
  const auto mono = mono_before + (mono_after - mono_before) / 2;
  return duration_cast<nanoseconds>(real).count() - duration_cast<nanoseconds>(mono).count();
}

bool has_letter(const char* text, std::size_t size) {
  return std::any_of(text, text + size, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); });
}

}  // namespace

std::unique_ptr<ExternalMeterSensor> ExternalMeterSensor::open(const std::string& spec, double max_gap_s) {
  std::unique_ptr<ExternalMeterSensor> meter(new ExternalMeterSensor());
  meter->spec_ = spec;
  SensorInfo& info = meter->info_;
  info.source = "external-meter";
  info.scope = SensorScope::system;
  info.has_power = true;
  info.power_method = "external meter readings (CSV timestamp_s,watts)";
  info.self_timed = true;
  info.max_gap_s = max_gap_s;
  info.counts_in_total = false;
  info.notes.push_back(
      "whole-system power at the wall: it includes every other sensor, so it is not added to the total");

  if (spec.rfind("file:", 0) == 0) {
    const std::string path = spec.substr(5);
    if (path.empty()) fail("--power-meter file:PATH: the path is empty");
    meter->fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (meter->fd_ < 0) {
      fail("--power-meter file:{}: cannot open the file: {}", path, errno_text(errno));
    }
    info.id = "meter:file";
    info.description = fmt::format("external meter, file {}", path);
  } else if (spec.rfind("cmd:", 0) == 0) {
    const std::string command = spec.substr(4);
    if (command.empty()) fail("--power-meter cmd:COMMAND: the command is empty");
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) fail("--power-meter {}: pipe failed: {}", spec, errno_text(errno));
    SpawnOptions options;
    options.stdout_fd = fds[1];
    options.new_process_group = true;
    int error = 0;
    meter->child_ = spawn_process({"/bin/sh", "-c", command}, options, error);
    ::close(fds[1]);
    if (meter->child_ < 0) {
      ::close(fds[0]);
      fail("--power-meter cmd:{}: cannot start /bin/sh: {}", command, errno_text(error));
    }
    meter->fd_ = fds[0];
    ::fcntl(meter->fd_, F_SETFL, ::fcntl(meter->fd_, F_GETFL) | O_NONBLOCK);
    info.id = "meter:cmd";
    info.description = fmt::format("external meter, command `{}`", command);
  } else {
    fail("--power-meter {}: expected file:PATH or cmd:COMMAND (CSV lines `timestamp_s,watts`)", spec);
  }
  meter->pending_.resize(kPendingCapacity);
  meter->realtime_minus_monotonic_ns_ = realtime_minus_monotonic_ns();
  return meter;
}

ExternalMeterSensor::~ExternalMeterSensor() {
  if (fd_ >= 0) ::close(fd_);
  if (child_ > 0) {
    ::kill(-child_, SIGTERM);  // the whole group: the shell and whatever it started
    int status = 0;
    while (::waitpid(child_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void ExternalMeterSensor::note_malformed(const char* text, std::size_t size) noexcept {
  if (malformed_.fetch_add(1, std::memory_order_relaxed) != 0) return;
  std::lock_guard lock(first_malformed_mutex_);
  first_malformed_line_ = lines_;
  const std::size_t n = std::min(size, first_malformed_text_.size() - 1);
  std::memcpy(first_malformed_text_.data(), text, n);
  first_malformed_text_[n] = '\0';
}

void ExternalMeterSensor::take_line(const char* begin, std::size_t size) noexcept {
  ++lines_;
  PowerLine line;
  const PowerLineKind kind = parse_power_line(std::string_view(begin, size), line);
  if (kind == PowerLineKind::skip) return;
  if (kind == PowerLineKind::malformed) {
    if (header_allowed_ && samples_.load(std::memory_order_relaxed) == 0 && has_letter(begin, size)) {
      header_allowed_ = false;  // one header line ("timestamp_s,watts") before the data
      return;
    }
    note_malformed(begin, size);
    return;
  }
  header_allowed_ = false;
  const std::int64_t time_ns = std::llround(line.timestamp_s * 1e9) - realtime_minus_monotonic_ns_;
  const std::int64_t newest =
      pending_count_ > 0 ? pending_[(pending_head_ + pending_count_ - 1) % pending_.size()].time_ns : last_time_ns_;
  if (time_ns <= newest) {
    out_of_order_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (pending_count_ == pending_.size()) {
    overflowed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  pending_[(pending_head_ + pending_count_) % pending_.size()] = {time_ns, line.watts};
  ++pending_count_;
  samples_.fetch_add(1, std::memory_order_relaxed);
}

std::size_t ExternalMeterSensor::read(std::int64_t now_ns, std::span<SensorReading> out) noexcept {
  // 1. Take whatever bytes are there (non-blocking), and cut them into lines.
  while (!eof_) {
    const std::size_t room = line_buffer_.size() - line_length_;
    const ssize_t n = ::read(fd_, line_buffer_.data() + line_length_, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) read_error_.store(errno);
      break;
    }
    if (n == 0) {
      if (child_ > 0) {  // the command closed its output; a file may still grow
        eof_ = true;
        command_closed_.store(true);
      }
      break;
    }
    line_length_ += static_cast<std::size_t>(n);
    std::size_t start = 0;
    for (std::size_t i = line_length_ - static_cast<std::size_t>(n); i < line_length_; ++i) {
      if (line_buffer_[i] != '\n') continue;
      if (!discarding_long_line_) take_line(line_buffer_.data() + start, i - start);
      discarding_long_line_ = false;
      start = i + 1;
    }
    if (start > 0) {
      std::memmove(line_buffer_.data(), line_buffer_.data() + start, line_length_ - start);
      line_length_ -= start;
    } else if (line_length_ == line_buffer_.size()) {
      // A line longer than the buffer: drop it up to its newline.
      if (!discarding_long_line_) {
        static constexpr char kTooLong[] = "(a line longer than 64 KiB)";
        ++lines_;
        note_malformed(kTooLong, sizeof kTooLong - 1);
      }
      discarding_long_line_ = true;
      line_length_ = 0;
    }
  }
  // 2. Release the readings whose time has come, oldest first.
  std::size_t written = 0;
  while (pending_count_ > 0 && written < out.size()) {
    const Pending& next = pending_[pending_head_];
    if (next.time_ns > now_ns) break;
    SensorReading& reading = out[written++];
    reading = SensorReading{};
    reading.time_ns = next.time_ns;
    reading.power_w = next.watts;
    reading.has_power = true;
    last_time_ns_ = next.time_ns;
    pending_head_ = (pending_head_ + 1) % pending_.size();
    --pending_count_;
  }
  return written;
}

std::string ExternalMeterSensor::describe_error(int error_code) const {
  return fmt::format("reading {}: {}", spec_, errno_text(error_code));
}

std::vector<std::string> ExternalMeterSensor::problems() const {
  std::vector<std::string> out;
  const std::uint64_t malformed = malformed_.load();
  if (malformed > 0) {
    std::lock_guard lock(first_malformed_mutex_);
    out.push_back(fmt::format("{}: {} malformed line{} skipped (first: line {}: `{}`; expected `timestamp_s,watts`)",
                              spec_, malformed, malformed == 1 ? "" : "s", first_malformed_line_,
                              first_malformed_text_.data()));
  }
  if (const std::uint64_t n = out_of_order_.load(); n > 0) {
    out.push_back(
        fmt::format("{}: {} reading{} skipped because their timestamp did not increase", spec_, n, n == 1 ? "" : "s"));
  }
  if (const std::uint64_t n = overflowed_.load(); n > 0) {
    out.push_back(
        fmt::format("{}: {} reading{} dropped: more than {} were waiting for their time "
                    "(timestamps far in the future?)",
                    spec_, n, n == 1 ? "" : "s", pending_.size()));
  }
  if (const int error = read_error_.load(); error != 0) {
    out.push_back(fmt::format("{}: read failed: {}", spec_, errno_text(error)));
  }
  if (command_closed_.load()) out.push_back(fmt::format("{}: the meter command closed its output", spec_));
  if (samples_.load() == 0) out.push_back(fmt::format("{}: no reading received", spec_));
  return out;
}

}  // namespace qjoule::energy

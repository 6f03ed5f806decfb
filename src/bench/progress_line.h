// One progress line on stderr for long work inside a sweep (an FP32 reference, a task's scoring): a
// terminal rewrites it in place, a log gets one every 10 s and the last one; each begins with its newline,
// as the sweep's notes do. Nothing is shown before `quiet_s` seconds have passed (short work stays silent).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>

namespace qjoule::bench::detail {

class ProgressLine {
 public:
  explicit ProgressLine(double quiet_s = 0.0) : quiet_s_(quiet_s) {}

  // Seconds since the line was made.
  double elapsed() const { return seconds(Clock::now()); }

  // Shows `line` (`last`: the work's final update, which a log always gets).
  void update(const std::string& line, bool last) {
    const auto now = Clock::now();
    if (!shown_ && seconds(now) < quiet_s_) return;
    if (tty_) {
      fmt::print(stderr, "{}{}", shown_ ? "\r\033[K" : "\n", line);
      shown_ = true;
    } else if (std::chrono::duration<double>(now - last_line_).count() >= 10.0 || last) {
      fmt::print(stderr, "\n{}", line);
      last_line_ = now;
      shown_ = true;
    }
  }

  // Ends a terminal's line where one was shown (for output that does not begin with its own newline).
  void finish() const {
    if (shown_ && tty_) fmt::print(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  double seconds(Clock::time_point t) const { return std::chrono::duration<double>(t - start_).count(); }

  double quiet_s_;
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  Clock::time_point start_ = Clock::now(), last_line_ = start_;
  bool shown_ = false;
};

}  // namespace qjoule::bench::detail

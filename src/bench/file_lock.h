// An exclusive lock on a file for as long as it lives (flock): what keeps two processes of one sweep (Slurm
// array tasks) from computing the same FP32 reference twice (lm_quality.h, task_accuracy.h).
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>

#include "qjoule/error.h"

namespace qjoule::bench::detail {

class FileLock {
 public:
  // Calls on_wait (once) when another process holds the lock, then waits for it.
  FileLock(const std::filesystem::path& path, const std::function<void()>& on_wait) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot open the lock file", path.string());
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
    on_wait();
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) fail("{}: cannot lock", path.string());
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace qjoule::bench::detail

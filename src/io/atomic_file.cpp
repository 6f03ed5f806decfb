#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::io {

std::string errno_text(int error) { return std::generic_category().message(error); }

void write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path temporary = path.string() + fmt::format(".tmp-{}", ::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write '{}': {}", path.string(), errno_text(errno));
  const auto give_up = [&](int error) {
    ::close(fd);
    ::unlink(temporary.c_str());
    fail("cannot write '{}': {}", path.string(), errno_text(error));
  };
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) give_up(n < 0 ? errno : EIO);
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) give_up(errno);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("cannot write '{}': {}", path.string(), errno_text(error));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail("cannot write '{}': {}", path.string(), errno_text(error));
  }
}

}  // namespace qjoule::io

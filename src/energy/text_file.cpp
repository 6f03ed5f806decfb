#include "energy/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace qjoule::energy {

TextFile read_text_file(const std::string& path) {
  TextFile file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    file.error = errno;
    return file;
  }
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      file.error = errno;
      ::close(fd);
      return file;
    }
    if (n == 0) break;
    file.text.append(buffer, static_cast<std::size_t>(n));
    if (file.text.size() > (1u << 20)) break;  // sysfs and /proc files here are small
  }
  ::close(fd);
  file.ok = true;
  return file;
}

std::string_view trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

std::optional<std::string> read_trimmed_line(const std::string& path) {
  TextFile file = read_text_file(path);
  if (!file.ok) return std::nullopt;
  std::string_view text = file.text;
  text = text.substr(0, text.find('\n'));
  return std::string(trim(text));
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  double value = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

int read_u64_file(const char* path, std::uint64_t& value) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buffer[64];
  ssize_t n;
  do {
    n = ::read(fd, buffer, sizeof buffer - 1);
  } while (n < 0 && errno == EINTR);
  const int read_error = n < 0 ? errno : 0;
  ::close(fd);
  if (read_error != 0) return read_error;
  std::size_t begin = 0;
  const auto size = static_cast<std::size_t>(n);
  while (begin < size && (buffer[begin] == ' ' || buffer[begin] == '\t')) ++begin;
  std::size_t end = begin;
  while (end < size && buffer[end] >= '0' && buffer[end] <= '9') ++end;
  if (end == begin) return EINVAL;
  std::uint64_t parsed = 0;
  const auto result = std::from_chars(buffer + begin, buffer + end, parsed);
  if (result.ec != std::errc()) return EINVAL;
  value = parsed;
  return 0;
}

std::string errno_text(int error) {
  char buffer[256];
  // GNU strerror_r returns the message (possibly not in buffer).
  const char* text = ::strerror_r(error, buffer, sizeof buffer);
  return text != nullptr ? std::string(text) : std::string("errno ") + std::to_string(error);
}

}  // namespace qjoule::energy

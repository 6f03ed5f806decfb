// Line splitting and name lists shared by the dataset readers.
#include <string>

#include "eval/dataset_readers.h"

namespace qjoule::eval {

std::vector<SourceLine> non_blank_lines(std::string_view bytes) {
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.remove_prefix(3);
  std::vector<SourceLine> lines;
  size_t number = 0;
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    std::string_view line = bytes.substr(0, newline);
    bytes.remove_prefix(newline == std::string_view::npos ? bytes.size() : newline + 1);
    ++number;
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) lines.push_back({number, line});
  }
  return lines;
}

namespace {
constexpr std::string_view kAsciiSpace = " \t\n\r\f\v";
}  // namespace

std::string_view rstrip_ascii_space(std::string_view text) {
  const size_t last = text.find_last_not_of(kAsciiSpace);
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

std::string_view strip_ascii_space(std::string_view text) {
  const size_t first = text.find_first_not_of(kAsciiSpace);
  return first == std::string_view::npos ? std::string_view() : rstrip_ascii_space(text.substr(first));
}

std::string join_names(const std::vector<std::string>& names) {
  std::string joined;
  for (const auto& name : names) joined += (joined.empty() ? "" : ", ") + name;
  return joined.empty() ? std::string("none") : joined;
}

}  // namespace qjoule::eval

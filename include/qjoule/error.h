// qjoule's error type: every bad-input path throws one of these with a single line that names the
// file, tensor or field, what was found and what was expected. The CLI prints `error: <what()>`.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace qjoule {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws qjoule::Error with a fmt-formatted one-line message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace qjoule

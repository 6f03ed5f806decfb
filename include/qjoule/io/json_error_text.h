#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qjoule::io {

// The readable part of a nlohmann parse failure. nlohmann's what() reads
// "[json.exception.parse_error.101] parse error at line 1, column 5: ..." or, for a number too large
// for a double, "[json.exception.out_of_range.406] number overflow parsing '1E400'"; this keeps what
// follows the tag. Catch nlohmann::json::exception, not parse_error: json::parse throws both.
inline std::string json_error_text(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  if (what.starts_with("[json.exception")) {
    if (const auto close = what.find("] "); close != std::string_view::npos) what.remove_prefix(close + 2);
  }
  return std::string(what);
}

}  // namespace qjoule::io

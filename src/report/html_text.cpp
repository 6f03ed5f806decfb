#include "qjoule/report/html_text.h"

#include <cctype>

namespace qjoule::report {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string json_for_script_element(const nlohmann::json& json) {
  const std::string text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  // '<' only occurs inside JSON strings, where "\/" and "\u0021" are valid escapes.
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '<' && text.compare(i, 2, "</") == 0) {
      out += "<\\/";
      ++i;
    } else if (text[i] == '<' && text.compare(i, 4, "<!--") == 0) {
      out += "<\\u0021--";
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string script_for_inline_element(std::string_view source) {
  static constexpr std::string_view kEnd = "</script";
  std::string out;
  out.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    bool is_end = source.size() - i >= kEnd.size();
    for (std::size_t k = 0; is_end && k < kEnd.size(); ++k)
      is_end = std::tolower(static_cast<unsigned char>(source[i + k])) == kEnd[k];
    if (is_end) {
      out += "<\\/";
      ++i;  // skip the '/'; the loop goes on from "script"
    } else {
      out += source[i];
    }
  }
  return out;
}

}  // namespace qjoule::report

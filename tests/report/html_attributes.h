// Reading attributes out of HTML text in tests, without std::regex (GCC 12 with ASan warns inside
// <regex>, which -Werror makes fatal).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qjoule::test {

// Every `name="value"` pair in `text` whose name starts with `prefix`, in order.
inline std::vector<std::pair<std::string, std::string>> attributes_with_prefix(const std::string& text,
                                                                               const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    if (at > 0 && text[at - 1] != ' ' && text[at - 1] != '<' && text[at - 1] != '\n' && text[at - 1] != '\t')
      continue;  // inside another name or a value
    const auto eq = text.find("=\"", at);
    if (eq == std::string::npos) break;
    const std::string name = text.substr(at, eq - at);
    if (name.find_first_of(" \"<>") != std::string::npos) continue;
    const auto close = text.find('"', eq + 2);
    if (close == std::string::npos) break;
    out.emplace_back(name, text.substr(eq + 2, close - eq - 2));
    at = close;
  }
  return out;
}

// The values of every `name="..."` in `text`.
inline std::vector<std::string> attribute_values(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& [n, v] : attributes_with_prefix(text, name))
    if (n == name) out.push_back(v);
  return out;
}

}  // namespace qjoule::test

// Typed reads of JSON values whose errors are one line naming the document, the key path, what was
// found and what was expected, e.g. "sweep file 'a.json': defaults.batch 0, expected at least 1".
// Shared by the sweep-file, run-config and run-record readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qjoule::bench::detail {

// Where a value sits: the document ("sweep file 'a.json'", "run record") and the key path inside it.
struct JsonPlace {
  std::string where;
  std::string path;  // "defaults.batch", "sweep.precision[1]"; empty for the document itself

  JsonPlace child(std::string_view key) const;
  JsonPlace element(std::size_t index) const;
  std::string text() const;  // "sweep file 'a.json': defaults.batch", or `where` alone
};

// "a string (\"8\")", "a number (1.5)", "null", "an array", "an object", "a boolean (true)".
std::string describe_json(const nlohmann::json& value);

// Fails unless `value` is an object whose keys are all in `expected`; an unknown key fails naming it
// and listing the expected keys.
void require_object_with_keys(const nlohmann::json& value, const JsonPlace& place,
                              std::span<const std::string_view> expected);
const nlohmann::json& required_member(const nlohmann::json& object, const JsonPlace& place, std::string_view key);

std::size_t read_positive_integer(const nlohmann::json& value, const JsonPlace& place);  // >= 1
std::uint64_t read_unsigned(const nlohmann::json& value, const JsonPlace& place);        // >= 0
double read_number(const nlohmann::json& value, const JsonPlace& place);                 // finite
bool read_bool(const nlohmann::json& value, const JsonPlace& place);
std::string read_string(const nlohmann::json& value, const JsonPlace& place);
std::vector<std::string> read_string_array(const nlohmann::json& value, const JsonPlace& place);

}  // namespace qjoule::bench::detail

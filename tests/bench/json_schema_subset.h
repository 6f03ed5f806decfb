// A tiny JSON Schema validator for the subset docs/bench-record.schema.json uses: type (a name or a
// list of names), enum, minimum, maximum, properties, required, additionalProperties (boolean) and
// items. Annotations ($schema, $id, title, description) are ignored; any other keyword is reported,
// so the schema cannot quietly rely on something this validator does not check.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qjoule::test {

// The problems found, each "<path>: <what>" ("$.batch: expected type integer, found string");
// empty when `value` is valid.
std::vector<std::string> validate_json_schema(const nlohmann::json& schema, const nlohmann::json& value,
                                              const std::string& path = "$");

}  // namespace qjoule::test

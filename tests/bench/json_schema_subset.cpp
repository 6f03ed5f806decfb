#include "json_schema_subset.h"

#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace qjoule::test {
namespace {

bool has_type(const nlohmann::json& value, const std::string& type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "string") return value.is_string();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "number") return value.is_number();
  if (type == "integer") {  // JSON Schema: any number with a zero fractional part, 1.0 included
    if (value.is_number_integer()) return true;
    return value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>();
  }
  return false;
}

std::string type_of(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();  // "null", "boolean", "string", "object", "array"
}

}  // namespace

std::vector<std::string> validate_json_schema(const nlohmann::json& schema, const nlohmann::json& value,
                                              const std::string& path) {
  static const std::set<std::string> kChecked = {
      "type", "enum", "minimum", "maximum", "properties", "required", "additionalProperties", "items"};
  static const std::set<std::string> kAnnotations = {"$schema", "$id", "title", "description"};
  std::vector<std::string> problems;
  for (const auto& item : schema.items())
    if (!kChecked.count(item.key()) && !kAnnotations.count(item.key()))
      problems.push_back(
          fmt::format("{}: the schema uses '{}', which this validator does not support", path, item.key()));

  if (const auto type = schema.find("type"); type != schema.end()) {
    std::vector<std::string> allowed;
    if (type->is_string()) {
      allowed.push_back(type->get<std::string>());
    } else {
      allowed = type->get<std::vector<std::string>>();
    }
    bool ok = false;
    for (const auto& t : allowed) ok = ok || has_type(value, t);
    if (!ok) {
      problems.push_back(
          fmt::format("{}: expected type {}, found {}", path, fmt::join(allowed, " or "), type_of(value)));
      return problems;  // the other keywords would only repeat the mismatch
    }
  }
  if (const auto e = schema.find("enum"); e != schema.end()) {
    bool found = false;
    for (const auto& allowed : *e) found = found || allowed == value;
    if (!found) problems.push_back(fmt::format("{}: {} is not one of {}", path, value.dump(), e->dump()));
  }
  if (value.is_number()) {
    if (const auto m = schema.find("minimum"); m != schema.end() && value.get<double>() < m->get<double>())
      problems.push_back(fmt::format("{}: {} is below the minimum {}", path, value.dump(), m->dump()));
    if (const auto m = schema.find("maximum"); m != schema.end() && value.get<double>() > m->get<double>())
      problems.push_back(fmt::format("{}: {} is above the maximum {}", path, value.dump(), m->dump()));
  }
  if (value.is_object()) {
    const auto properties = schema.value("properties", nlohmann::json::object());
    if (const auto required = schema.find("required"); required != schema.end())
      for (const auto& key : *required)
        if (!value.contains(key.get<std::string>()))
          problems.push_back(fmt::format("{}: missing required key '{}'", path, key.get<std::string>()));
    const bool closed = schema.contains("additionalProperties") && schema["additionalProperties"] == false;
    for (const auto& item : value.items()) {
      const std::string child = fmt::format("{}.{}", path, item.key());
      if (properties.contains(item.key())) {
        for (auto& p : validate_json_schema(properties[item.key()], item.value(), child)) problems.push_back(p);
      } else if (closed) {
        problems.push_back(fmt::format("{}: key '{}' is not allowed (additionalProperties: false)", path, item.key()));
      }
    }
  }
  if (value.is_array()) {
    if (const auto items = schema.find("items"); items != schema.end())
      for (std::size_t i = 0; i < value.size(); ++i)
        for (auto& p : validate_json_schema(*items, value[i], fmt::format("{}[{}]", path, i))) problems.push_back(p);
  }
  return problems;
}

}  // namespace qjoule::test

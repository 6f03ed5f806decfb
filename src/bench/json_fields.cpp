#include "bench/json_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"

namespace qjoule::bench::detail {
namespace {

// Integral JSON numbers as unsigned; also accepts integral floats such as 8.0 (some writers emit them).
// Returns false for fractions, non-finite values and anything that is not a number.
bool as_integer(const nlohmann::json& value, long double& out) {
  if (value.is_number_unsigned()) {
    out = static_cast<long double>(value.get<std::uint64_t>());
    return true;
  }
  if (value.is_number_integer()) {
    out = static_cast<long double>(value.get<std::int64_t>());
    return true;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d || std::fabs(d) > 9007199254740992.0) return false;  // 2^53
    out = static_cast<long double>(d);
    return true;
  }
  return false;
}

[[noreturn]] void wrong_type(const nlohmann::json& value, const JsonPlace& place, std::string_view expected) {
  fail("{} is {}, expected {}", place.text(), describe_json(value), expected);
}

}  // namespace

JsonPlace JsonPlace::child(std::string_view key) const {
  return {where, path.empty() ? std::string(key) : fmt::format("{}.{}", path, key)};
}

JsonPlace JsonPlace::element(std::size_t index) const { return {where, fmt::format("{}[{}]", path, index)}; }

std::string JsonPlace::text() const { return path.empty() ? where : fmt::format("{}: {}", where, path); }

std::string describe_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::boolean: return fmt::format("a boolean ({})", value.get<bool>());
    case nlohmann::json::value_t::string: {
      std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (text.size() > 40) text = text.substr(0, 37) + "...";
      return fmt::format("a string ({})", text);
    }
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return fmt::format("a number ({})", value.dump());
    default: return "an unsupported JSON value";
  }
}

void require_object_with_keys(const nlohmann::json& value, const JsonPlace& place,
                              std::span<const std::string_view> expected) {
  if (!value.is_object()) wrong_type(value, place, "an object");
  for (const auto& item : value.items()) {
    bool known = false;
    for (auto key : expected) known = known || key == item.key();
    if (!known)
      fail("{}: unknown key '{}', expected one of: {}", place.where, place.child(item.key()).path,
           fmt::join(expected, ", "));
  }
}

const nlohmann::json& required_member(const nlohmann::json& object, const JsonPlace& place, std::string_view key) {
  const auto it = object.find(std::string(key));
  if (it == object.end()) fail("{}: missing key '{}'", place.where, place.child(key).path);
  return *it;
}

std::size_t read_positive_integer(const nlohmann::json& value, const JsonPlace& place) {
  long double n = 0;
  if (!as_integer(value, n)) wrong_type(value, place, "a positive integer");
  if (n < 1) fail("{} {}, expected at least 1", place.text(), value.dump());
  if (n > static_cast<long double>(std::numeric_limits<std::size_t>::max()))
    fail("{} {} is too large", place.text(), value.dump());
  return static_cast<std::size_t>(n);
}

std::uint64_t read_unsigned(const nlohmann::json& value, const JsonPlace& place) {
  long double n = 0;
  if (!as_integer(value, n)) wrong_type(value, place, "a non-negative integer");
  if (n < 0) fail("{} {}, expected at least 0", place.text(), value.dump());
  return static_cast<std::uint64_t>(n);
}

double read_number(const nlohmann::json& value, const JsonPlace& place) {
  if (!value.is_number()) wrong_type(value, place, "a number");
  return value.get<double>();
}

bool read_bool(const nlohmann::json& value, const JsonPlace& place) {
  if (!value.is_boolean()) wrong_type(value, place, "true or false");
  return value.get<bool>();
}

std::string read_string(const nlohmann::json& value, const JsonPlace& place) {
  if (!value.is_string()) wrong_type(value, place, "a string");
  return value.get<std::string>();
}

std::vector<std::string> read_string_array(const nlohmann::json& value, const JsonPlace& place) {
  if (!value.is_array()) wrong_type(value, place, "an array of strings");
  std::vector<std::string> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(read_string(value[i], place.element(i)));
  return out;
}

}  // namespace qjoule::bench::detail

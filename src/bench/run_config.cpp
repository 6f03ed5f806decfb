#include "qjoule/bench/run_config.h"

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bench/json_fields.h"
#include "bench/run_config_reader.h"
#include "qjoule/error.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::bench {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    const auto end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

}  // namespace

std::string sanitize_name_token(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool keep =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (keep) out.push_back(c);
  }
  return out;
}

std::string precision_token(const quant::Precision& precision) {
  if (precision.spec()) return quant::run_token(*precision.spec());
  // Not a spec this qjoule reads (a typo, or a record from another version): still a name, so that
  // the error about it can say which run it is. Its parts, sanitized, in the order given.
  const std::vector<std::string> parts = split(precision.text(), ':');
  std::string token = sanitize_name_token(parts.front());
  if (const auto format = quant::find_format(parts.front())) token = quant::traits(*format).run_token;
  if (token.empty()) fail("precision '{}' has no format, expected e.g. fp32, int8, int4:g=64:asym", precision);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (const std::string clean = sanitize_name_token(parts[i]); !clean.empty()) token += "_" + clean;
  }
  return token;
}

std::string model_token(const std::string& model) {
  // lexically_normal turns "dir/model/" into "dir/model/" with an empty filename: strip the slash.
  auto path = std::filesystem::path(model).lexically_normal();
  if (!path.has_filename() && path.has_parent_path()) path = path.parent_path();
  const std::string token = sanitize_name_token(path.filename().string());
  if (token.empty() || token == "." || token == "..")
    fail("model '{}' gives no name for the run, expected a name or a checkpoint folder", model);
  return token;
}

std::string run_name(const RunConfig& config) {
  const std::string device = sanitize_name_token(config.device);
  if (device.empty()) fail("device '{}' gives no name for the run, expected e.g. cpu", config.device);
  return fmt::format("{}_{}_{}_s{}_bs{}_t{}", model_token(config.model), device, precision_token(config.precision),
                     config.seq, config.batch, config.threads);
}

nlohmann::json to_json(const RunConfig& config) {
  return {{"model", config.model}, {"device", config.device}, {"precision", config.precision.text()},
          {"batch", config.batch}, {"seq", config.seq},       {"threads", config.threads}};
}

RunConfig run_config_from_json(const nlohmann::json& json) { return detail::read_run_config(json, {"run config", ""}); }

namespace detail {

void read_run_config_field(RunConfig& config, std::string_view key, const nlohmann::json& value,
                           const JsonPlace& place) {
  if (key == "model") {
    config.model = read_string(value, place);
  } else if (key == "device") {
    config.device = read_string(value, place);
  } else if (key == "precision") {
    config.precision = read_string(value, place);
  } else if (key == "batch") {
    config.batch = read_positive_integer(value, place);
  } else if (key == "seq") {
    config.seq = read_positive_integer(value, place);
  } else if (key == "threads") {
    const auto threads = read_positive_integer(value, place);
    if (threads > (std::size_t{1} << 20)) fail("{} {} is too large", place.text(), threads);
    config.threads = static_cast<int>(threads);
  } else {
    fail("{}: '{}' is not a run configuration key", place.where, key);
  }
}

RunConfig read_run_config(const nlohmann::json& object, const JsonPlace& place) {
  require_object_with_keys(object, place, kRunConfigKeys);
  RunConfig config;
  for (auto key : kRunConfigKeys)
    if (const auto it = object.find(std::string(key)); it != object.end())
      read_run_config_field(config, key, *it, place.child(key));
  return config;
}

}  // namespace detail

}  // namespace qjoule::bench

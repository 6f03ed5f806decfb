// One benchmark configuration (model, device, precision spec, shape, threads) and its run name, the
// key that identifies a run in results.jsonl, on resume and in every table.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qjoule::bench {

struct RunConfig {
  std::string model = "distilbert-base";  // a name or a checkpoint folder
  std::string device = "cpu";
  std::string precision = "fp32";  // full spec, may carry options: "int4:g64:asym", "nf4:dq", "int8:sq0.5"
  std::size_t batch = 1;
  std::size_t seq = 128;
  int threads = 1;
};

// The keys of a configuration, in the order they appear in records and sweep files.
inline constexpr std::array<std::string_view, 6> kRunConfigKeys = {"model", "device", "precision",
                                                                   "batch", "seq",    "threads"};

// Keeps only [A-Za-z0-9.-]: `_` separates the parts of a run name, so no part may contain one.
std::string sanitize_name_token(std::string_view text);

// The canonical name of a precision spec, with defaults filled in so that equal formats get equal
// names: "fp32", "int8_w8a8", "int8_w8a8_sq0.5", "w8a32", "int4_g128_sym" (for "int4" and
// "int4:g128:sym" alike), "int4_g64_asym", "nf4", "nf4_dq"; unknown options are kept sanitized, in
// the order given, after the known ones; an `emulate` option anywhere adds "_emulated" last.
// An empty format ("", ":g64") fails.
std::string precision_token(const std::string& precision);

// The model's part of a run name: a path gives its last component, then sanitized. Empty fails.
std::string model_token(const std::string& model);

// "<model>_<device>_<precision token>_s<seq>_bs<batch>_t<threads>",
// e.g. "distilbert-base_cpu_int8_w8a8_s128_bs8_t2".
std::string run_name(const RunConfig& config);

// {"model", "device", "precision", "batch", "seq", "threads"}.
nlohmann::json to_json(const RunConfig& config);

// Reads an object with any of the six keys (missing ones keep RunConfig's defaults). Unknown keys,
// wrong types and numbers below 1 fail with a line naming the key, what was found and what was expected.
RunConfig run_config_from_json(const nlohmann::json& json);

}  // namespace qjoule::bench

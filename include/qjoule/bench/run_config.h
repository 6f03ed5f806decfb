// One benchmark configuration (model, device, precision spec, shape, threads) and its run name, the
// key that identifies a run in results.jsonl, on resume and in every table.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qjoule/quant/precision.h"

namespace qjoule::bench {

struct RunConfig {
  std::string model = "distilbert-base";  // a name or a checkpoint folder
  std::string device = "cpu";
  // A format spec (quant/format_spec.h) as written and parsed once: "int4:g=64:asym", "nf4:dq", "int8:sq=0.5".
  quant::Precision precision = "fp32";
  std::size_t batch = 1;
  std::size_t seq = 128;
  int threads = 1;
};

// The keys of a configuration, in the order they appear in records and sweep files.
inline constexpr std::array<std::string_view, 6> kRunConfigKeys = {"model", "device", "precision",
                                                                   "batch", "seq",    "threads"};

// Keeps only [A-Za-z0-9.-]: `_` separates the parts of a run name, so no part may contain one.
std::string sanitize_name_token(std::string_view text);

// The canonical name of a precision spec (quant::run_token): equal formats get equal names, so "int4"
// and "int4:g=128:sym" both give "int4_g128_sym"; "int8:sq=0.5" and "int8:sq0.5" give
// "int8_w8a8_sq0.5". A spec that does not parse still gets a name (its parts, sanitized, joined by
// '_') so that the error about it can name the run; one with no format ("", ":g64") fails.
std::string precision_token(const quant::Precision& precision);

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

// A sweep: default run parameters plus the keys swept over, expanded into the ordered list of runs,
// from a JSON sweep file or from CLI lists ("--batch 1,8").
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "qjoule/bench/run_config.h"

namespace qjoule::bench {

struct SweepSpec {
  RunConfig defaults;
  // Swept keys (kRunConfigKeys: model, device, precision, batch, seq, threads) in the order given,
  // each with its values as text ("8" for batch 8).
  std::vector<std::pair<std::string, std::vector<std::string>>> swept;
  enum class Mode { cross_product, one_at_a_time } mode = Mode::cross_product;
};

// The runs of a sweep, each configuration once (by run_name; the first occurrence is kept).
//
// cross_product: every combination. Keys nest in the order given, the last varying fastest, except
//   that `precision` always varies fastest and its fp32 values come first: each FP32 baseline runs
//   right before the quantized variants of the same model and shape, which compare against it.
//   E.g. swept {batch: [1, 8], precision: [int8, fp32]} gives
//   (bs1, fp32), (bs1, int8), (bs8, fp32), (bs8, int8).
// one_at_a_time: the defaults once, then each swept key alone over its values (in the order given),
//   the other keys at their defaults.
//
// Fails on an unknown or repeated key, a key with no values, or a number that is not a positive integer.
std::vector<RunConfig> expand_sweep(const SweepSpec& spec);

// Reads a sweep file:
//   {"defaults": {"batch": 1, "seq": 128, "threads": 2},
//    "sweep": {"precision": ["fp32", "int8"], "batch": [1, 8]},
//    "mode": "cross_product"}                       (or "one_at_a_time"; every key optional)
// Unknown keys at any level fail naming the file, the key and the expected keys; wrong types fail
// naming the key, what was found and what was expected; numbers must be integers >= 1.
SweepSpec parse_sweep_file(const std::filesystem::path& path);

// CLI lists. option is the flag as the user typed it ("--batch"), used in messages:
//   parse_size_list("--batch", "1,8") -> {1, 8}; "1,x" fails "--batch '1,x': 'x' is not a positive
//   integer"; "0" fails "--batch 0: expected at least 1".
std::vector<std::size_t> parse_size_list(const std::string& option, const std::string& text);
// Comma-separated, items trimmed; an empty item (or an empty list) fails.
std::vector<std::string> parse_string_list(const std::string& option, const std::string& text);

}  // namespace qjoule::bench

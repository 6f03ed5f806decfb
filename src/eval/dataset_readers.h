// The per-format dataset readers behind load_dataset, and what they share. Internal to qjoule_eval.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/dataset.h"

namespace qjoule::eval {

// One line of a text file: its 1-based number and its bytes without the line ending.
struct SourceLine {
  size_t number = 0;
  std::string_view text;
};

// Splits on LF (a CR before it is dropped); skips blank lines; drops a leading UTF-8 BOM.
std::vector<SourceLine> non_blank_lines(std::string_view bytes);

// Python's str.strip() and str.rstrip() on ASCII whitespace (space, \t, \n, \r, \f, \v): the task files'
// preprocessing and lm-eval's pair encoding (task_file.h, task_scoring.h).
std::string_view strip_ascii_space(std::string_view text);
std::string_view rstrip_ascii_space(std::string_view text);

// "a, b, c" for messages.
std::string join_names(const std::vector<std::string>& names);

// What a JSON value is, for messages: `"abc" (a JSON string)`, ASCII-escaped and shortened.
std::string describe(const nlohmann::json& value);
// An object's field names, in its order.
std::vector<std::string> field_names(const nlohmann::json& object);

// Reads `bytes` (the whole file) as a GLUE-style / generic TSV with a header line.
Dataset read_tsv_dataset(const std::filesystem::path& path, std::string_view bytes, const DatasetOptions& options);
// Reads `bytes` as JSON Lines with text or pre-tokenised input_ids.
Dataset read_jsonl_dataset(const std::filesystem::path& path, std::string_view bytes, const DatasetOptions& options);

}  // namespace qjoule::eval

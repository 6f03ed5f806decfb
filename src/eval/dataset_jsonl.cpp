// JSON Lines datasets: one object per line, with a text field or pre-tokenised input_ids, and an
// integer label.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/dataset_readers.h"
#include "qjoule/error.h"
#include "qjoule/io/json_error_text.h"
#include "qjoule/tokenize/utf8.h"

namespace qjoule::eval {

std::string describe(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("{} (a JSON {})", text, value.type_name());
}

std::vector<std::string> field_names(const nlohmann::json& object) {
  std::vector<std::string> names;
  for (const auto& item : object.items()) names.push_back(item.key());
  return names;
}

namespace {

using nlohmann::json;

// The name of the first field of `object` among `names`, or the first of them when none is there.
std::string pick_field(const json& object, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (object.contains(name)) return name;
  }
  return *names.begin();
}

std::optional<int64_t> as_int(const json& value, int64_t min, int64_t max) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(max)) return std::nullopt;
    const auto s = static_cast<int64_t>(v);
    return s >= min ? std::optional<int64_t>(s) : std::nullopt;
  }
  if (value.is_number_integer()) {
    const auto v = value.get<int64_t>();
    return v >= min && v <= max ? std::optional<int64_t>(v) : std::nullopt;
  }
  return std::nullopt;
}

std::vector<int32_t> read_ids(const json& object, const char* field, int64_t max, const std::string& where) {
  const json& array = object.at(field);
  if (!array.is_array()) fail("{}: {} is {}, expected an array of integers", where, field, describe(array));
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i) {
    const auto id = as_int(array[i], 0, max);
    if (!id) {
      fail("{}: {}[{}] is {}, expected an integer in 0..{}", where, field, i, describe(array[i]), max);
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

}  // namespace

Dataset read_jsonl_dataset(const std::filesystem::path& path, std::string_view bytes, const DatasetOptions& options) {
  const std::string file = path.string();
  const std::vector<SourceLine> lines = non_blank_lines(bytes);
  if (lines.empty()) {
    fail("{}: empty dataset (no lines), expected one JSON object per line", file);
  }
  Dataset dataset;
  dataset.path = path;
  dataset.examples.reserve(lines.size());
  std::string text_field = options.text_column;
  std::string label_field = options.label_column;

  for (const SourceLine& line : lines) {
    const std::string where = fmt::format("{}:{}", file, line.number);
    tokenize::check_utf8(line.text, where);
    json object;
    try {
      object = json::parse(line.text);
    } catch (const json::exception& e) {
      fail("{}: malformed JSON ({}); expected one JSON object per line", where, io::json_error_text(e));
    }
    if (!object.is_object()) {
      fail("{}: found a JSON {}, expected one JSON object per line (JSON Lines){}", where, object.type_name(),
           object.is_array() && dataset.examples.empty() ? ", not a JSON array" : "");
    }

    // The first line decides the kind of dataset and the field names.
    if (dataset.examples.empty()) {
      dataset.pretokenized = options.text_column.empty() && object.contains("input_ids");
      if (!dataset.pretokenized && text_field.empty()) {
        text_field = pick_field(object, {"text", "sentence"});
        if (!object.contains(text_field)) {
          fail(
              "{}: no text field (found fields: {}), expected 'text', 'sentence' or 'input_ids', "
              "or a --text-column name",
              where, join_names(field_names(object)));
        }
      }
      if (label_field.empty()) label_field = pick_field(object, {"label", "labels"});
    }

    Example example;
    example.line = line.number;
    if (dataset.pretokenized) {
      if (!object.contains("input_ids")) {
        fail("{}: no 'input_ids' field (found fields: {}), expected pre-tokenised ids as on line {}", where,
             join_names(field_names(object)), dataset.examples.front().line);
      }
      example.input_ids = read_ids(object, "input_ids", std::numeric_limits<int32_t>::max(), where);
      if (example.input_ids.empty()) fail("{}: input_ids is empty, expected at least one token id", where);
      if (object.contains("attention_mask") && !object["attention_mask"].is_null()) {
        example.attention_mask = read_ids(object, "attention_mask", 1, where);
        if (example.attention_mask.size() != example.input_ids.size()) {
          fail("{}: attention_mask has {} entries, expected {} (one per input id)", where,
               example.attention_mask.size(), example.input_ids.size());
        }
      } else {
        example.attention_mask.assign(example.input_ids.size(), 1);
      }
    } else {
      const auto text = object.find(text_field);
      if (text == object.end()) {
        fail("{}: no '{}' field (found fields: {}), expected a string of text", where, text_field,
             join_names(field_names(object)));
      }
      if (!text->is_string()) fail("{}: '{}' is {}, expected a string", where, text_field, describe(*text));
      example.text = text->get<std::string>();
    }

    const auto label = object.find(label_field);
    if (label == object.end() || label->is_null()) {
      if (options.require_labels) {
        fail("{}: row has no label (no '{}' field; found fields: {}), expected an integer class id{}", where,
             label_field, join_names(field_names(object)),
             options.label_column.empty() ? " in 'label' or 'labels', or a --label-column name" : "");
      }
    } else if (const auto value = as_int(*label, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())) {
      example.label = static_cast<int>(*value);
    } else {
      fail("{}: '{}' is {}, expected an integer class id{}", where, label_field, describe(*label),
           label->is_string() ? " (string labels such as id2label names are not supported)" : "");
    }
    dataset.examples.push_back(std::move(example));
  }
  return dataset;
}

}  // namespace qjoule::eval

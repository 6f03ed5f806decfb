// TSV datasets: a header line naming the columns, then one example per line (GLUE style).
#include <charconv>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "eval/dataset_readers.h"
#include "qjoule/error.h"
#include "qjoule/tokenize/utf8.h"

namespace qjoule::eval {
namespace {

std::vector<std::string_view> split_tabs(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (size_t tab = line.find('\t'); tab != std::string_view::npos; tab = line.find('\t', start)) {
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
  fields.push_back(line.substr(start));
  return fields;
}

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// The column named `wanted` when given, else the first of `auto_names` present.
std::optional<size_t> find_column(const std::vector<std::string>& header, const std::string& wanted,
                                  std::initializer_list<std::string_view> auto_names) {
  const auto index_of = [&header](std::string_view name) -> std::optional<size_t> {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    return std::nullopt;
  };
  if (!wanted.empty()) return index_of(wanted);
  for (const std::string_view name : auto_names) {
    if (const auto index = index_of(name)) return index;
  }
  return std::nullopt;
}

int parse_label(std::string_view field, const std::string& where, const std::string& column) {
  int label = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), label);
  if (error == std::errc::result_out_of_range) {
    fail("{}: label '{}' in column '{}' is out of the int range, expected a small integer class id", where, field,
         column);
  }
  if (error != std::errc() || end != field.data() + field.size()) {
    fail(
        "{}: label '{}' in column '{}' is not an integer, expected an integer class id "
        "(string labels such as id2label names are not supported)",
        where, field, column);
  }
  return label;
}

// One line for a header without the `kind` ("text", "label") column: neither of its default names,
// or not the --<kind>-column name given.
[[noreturn]] void fail_missing_column(const std::string& where, const std::vector<std::string>& header,
                                      const std::string& given, const char* kind, const char* defaults) {
  if (given.empty())
    fail("{}: header has no {} column (found columns: {}), expected one named {}, or a --{}-column name", where, kind,
         join_names(header), defaults, kind);
  fail("{}: header has no '{}' column (found columns: {}), expected the --{}-column name there", where, given,
       join_names(header), kind);
}

}  // namespace

Dataset read_tsv_dataset(const std::filesystem::path& path, std::string_view bytes, const DatasetOptions& options) {
  const std::string file = path.string();
  const std::vector<SourceLine> lines = non_blank_lines(bytes);
  if (lines.empty()) {
    fail("{}: empty dataset (no lines), expected a header line and at least one data row", file);
  }

  const SourceLine& header_line = lines.front();
  const std::string header_where = fmt::format("{}:{}", file, header_line.number);
  tokenize::check_utf8(header_line.text, header_where);
  std::vector<std::string> header;
  for (const std::string_view name : split_tabs(header_line.text)) header.emplace_back(trim(name));

  const std::optional<size_t> text_column = find_column(header, options.text_column, {"sentence", "text"});
  if (!text_column) fail_missing_column(header_where, header, options.text_column, "text", "'sentence' or 'text'");
  const std::optional<size_t> label_column = find_column(header, options.label_column, {"label", "labels"});
  if (!label_column && (options.require_labels || !options.label_column.empty()))
    fail_missing_column(header_where, header, options.label_column, "label", "'label' or 'labels'");

  Dataset dataset;
  dataset.path = path;
  dataset.examples.reserve(lines.size() - 1);
  for (size_t i = 1; i < lines.size(); ++i) {
    const SourceLine& line = lines[i];
    const std::string where = fmt::format("{}:{}", file, line.number);
    tokenize::check_utf8(line.text, where);
    const std::vector<std::string_view> fields = split_tabs(line.text);
    if (fields.size() != header.size()) {
      fail("{}: found {} tab-separated fields, expected {} as in the header ({})", where, fields.size(), header.size(),
           join_names(header));
    }
    Example example;
    example.line = line.number;
    example.text = std::string(fields[*text_column]);
    if (label_column) {
      const std::string_view field = trim(fields[*label_column]);
      if (!field.empty()) {
        example.label = parse_label(field, where, header[*label_column]);
      } else if (options.require_labels) {
        fail("{}: row has no label (column '{}' is empty), expected an integer class id", where, header[*label_column]);
      }
    }
    dataset.examples.push_back(std::move(example));
  }
  if (dataset.examples.empty()) {
    fail("{}: empty dataset (only a header line), expected at least one data row", file);
  }
  return dataset;
}

}  // namespace qjoule::eval

#include "qjoule/bench/results_csv.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "qjoule/bench/task_table.h"

namespace qjoule::bench {
namespace {

// RFC 4180: quote a cell holding a comma, quote or line break, doubling its quotes.
std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

std::string cell_text(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value) {
      if (!joined.empty()) joined += "; ";
      joined += item.is_string() ? item.get<std::string>() : item.dump();
    }
    return joined;
  }
  return value.dump();  // numbers (shortest text that reads back the same double) and booleans
}

}  // namespace

std::vector<std::string_view> results_csv_columns() {
  std::vector<std::string_view> columns;
  for (auto key : kRunRecordKeys)
    if (key != "environment" && key != "energy_window" && key != "decode_energy_window" && key != "tasks")
      columns.push_back(key);
  return columns;
}

std::string format_results_csv(const std::vector<RunRecord>& records) {
  const auto columns = results_csv_columns();
  const auto tasks = task_names(records);
  std::string csv = fmt::format("{}", fmt::join(columns, ","));
  for (const auto& task : tasks)
    for (auto figure : kResultsCsvTaskFigures) csv += ',' + csv_cell(fmt::format("task.{}.{}", task, figure));
  csv += '\n';
  for (const auto& record : records) {
    const auto json = to_json(record);
    std::string line;
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (c > 0) line += ',';
      line += csv_cell(cell_text(json.at(std::string(columns[c]))));
    }
    for (const auto& task : tasks) {
      const bool has = record.tasks.is_object() && record.tasks.contains(task);
      for (auto figure : kResultsCsvTaskFigures) {
        const std::string key(figure);
        line += ',';
        if (has && record.tasks.at(task).contains(key)) line += csv_cell(cell_text(record.tasks.at(task).at(key)));
      }
    }
    csv += line + '\n';
  }
  return csv;
}

void write_results_csv(const std::vector<RunRecord>& records, const std::filesystem::path& path) {
  io::write_file_atomically(path, format_results_csv(records));
}

}  // namespace qjoule::bench

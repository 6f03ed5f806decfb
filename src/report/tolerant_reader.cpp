#include "qjoule/report/tolerant_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "qjoule/bench/results_store.h"
#include "qjoule/error.h"

namespace qjoule::report {
namespace {

std::string read_whole_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("cannot read '{}': is a directory", path.string());
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path.string(), std::generic_category().message(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("cannot read '{}': read error", path.string());
  return text.str();
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// nlohmann's messages start with "[json.exception.parse_error.101] parse error at line 1, ...";
// the bracketed id says nothing to a reader of the report.
std::string parse_error_text(const std::exception& e) {
  std::string text = e.what();
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("] ");
    if (close != std::string::npos) text.erase(0, close + 2);
  }
  return text;
}

}  // namespace

ReadResults read_results_tolerantly(const std::vector<std::filesystem::path>& files) {
  if (files.empty()) fail("no results file given, expected one or more results.jsonl");
  ReadResults out;
  std::map<std::string, std::string> seen;  // run name -> "file:line" where it was read
  for (const auto& given : files) {
    std::error_code ec;
    const std::filesystem::path file =
        std::filesystem::is_directory(given, ec) ? given / bench::kResultsFileName : given;
    const std::string text = read_whole_file(file);
    std::size_t begin = 0, number = 0;
    while (begin < text.size()) {
      const std::size_t newline = text.find('\n', begin);
      const bool last_without_newline = newline == std::string::npos;
      const std::string line = text.substr(begin, last_without_newline ? std::string::npos : newline - begin);
      begin = last_without_newline ? text.size() : newline + 1;
      ++number;
      if (is_blank(line)) continue;
      const auto skip = [&](std::string reason) { out.skipped.push_back({file, number, std::move(reason)}); };

      nlohmann::json json;
      try {
        json = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        skip(last_without_newline ? fmt::format("truncated last line (no newline at the end, {} bytes): not JSON ({})",
                                                line.size(), parse_error_text(e))
                                  : fmt::format("not JSON ({})", parse_error_text(e)));
        continue;
      }
      if (!json.is_object()) {
        skip(fmt::format("not a run record: a JSON {}, expected an object", json.type_name()));
        continue;
      }
      const auto version = json.find("schema_version");
      if (version != json.end() && version->is_number_integer() &&
          version->get<long long>() > bench::kRunRecordSchemaVersion) {
        skip(fmt::format("schema_version {} is newer than this qjoule reads ({}): written by a newer qjoule",
                         version->get<long long>(), bench::kRunRecordSchemaVersion));
        continue;
      }
      bench::RunRecord record;
      try {
        record = bench::run_record_from_json(json);
      } catch (const std::exception& e) {  // qjoule::Error, or a json type error from a nested value
        skip(parse_error_text(e));
        continue;
      }
      const std::string where = fmt::format("{}:{}", file.string(), number);
      const auto [previous, inserted] = seen.emplace(record.run_name, where);
      if (!inserted) {
        skip(fmt::format("run '{}' was already read at {}", record.run_name, previous->second));
        continue;
      }
      out.records.push_back(std::move(record));
      out.sources.push_back(file);
    }
  }
  if (out.records.empty()) {
    std::string files_text;
    for (const auto& f : files) files_text += fmt::format("{}'{}'", files_text.empty() ? "" : ", ", f.string());
    if (out.skipped.empty()) fail("no run records in {}: nothing to report", files_text);
    const auto& first = out.skipped.front();
    fail("no valid run records in {}: {} line(s) skipped, the first {}:{}: {}", files_text, out.skipped.size(),
         first.file.string(), first.line, first.reason);
  }
  return out;
}

}  // namespace qjoule::report

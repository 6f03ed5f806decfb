// Reads results.jsonl files for a report, keeping what can be read: unlike ResultsStore (which
// guards a bench's own record and fails on any bad line), a report should still render when a file
// was cut short, edited, or written by a newer qjoule, and say which lines it left out and why.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "qjoule/bench/run_record.h"

namespace qjoule::report {

struct SkippedLine {
  std::filesystem::path file;
  std::size_t line = 0;  // 1-based
  std::string reason;    // one line: "not JSON (...)", "schema_version 2 is newer than ...", ...
};

struct ReadResults {
  std::vector<bench::RunRecord> records;
  std::vector<std::filesystem::path> sources;  // the file each record came from (parallel to records)
  std::vector<SkippedLine> skipped;
};

// Reads every line of every file (a directory stands for its results.jsonl), in order. Blank lines
// are ignored. A line that is not JSON (a torn last line among them), not an object, has a newer
// schema_version, fails bench::run_record_from_json, or repeats a run name already read is skipped
// with its reason. A file that cannot be opened fails naming it; so do no files, and files that
// hold no valid record at all (naming the first skipped line).
ReadResults read_results_tolerantly(const std::vector<std::filesystem::path>& files);

}  // namespace qjoule::report

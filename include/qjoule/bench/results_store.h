// The crash-safe record of a benchmark: results.jsonl in the output directory, one RunRecord per
// line, appended one whole line at a time and fsynced, so a killed run loses at most the line it
// was writing and a rerun resumes by skipping the run names already recorded.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "qjoule/bench/paper_table.h"  // the projections of the store's records: summary.md
#include "qjoule/bench/results_csv.h"  // and results.csv
#include "qjoule/bench/run_record.h"

namespace qjoule::bench {

inline constexpr const char* kResultsFileName = "results.jsonl";

class ResultsStore {
 public:
  // Creates out_dir (and parents) and checks that it is writable before any run starts: a directory
  // that cannot be created or written fails "output directory 'X' is not writable: <strerror>".
  // An existing results.jsonl is read: a torn last line left by a killed run (no trailing newline,
  // or not JSON) is cut off the file and reported in notes(); a bad line before the last, a record
  // that does not read (e.g. another schema_version) or a repeated run name fails naming the file
  // and line number.
  static ResultsStore open(const std::filesystem::path& out_dir);

  ResultsStore(ResultsStore&& other) noexcept;
  ResultsStore& operator=(ResultsStore&& other) noexcept;
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;
  ~ResultsStore();

  const std::vector<RunRecord>& records() const { return records_; }
  bool has(const std::string& run_name) const { return names_.count(run_name) != 0; }

  // Appends one line (one write(2) of the whole line and its '\n', O_APPEND), then fsyncs. A run name
  // already recorded fails: resume skips recorded runs rather than recording them twice.
  void append(const RunRecord& record);

  // What open() repaired, e.g. "results.jsonl: cut off a torn last line (57 bytes) left by an
  // interrupted run". Empty when the file was clean.
  const std::vector<std::string>& notes() const { return notes_; }

  const std::filesystem::path& out_dir() const { return out_dir_; }
  std::filesystem::path results_path() const { return out_dir_ / kResultsFileName; }

 private:
  ResultsStore(std::filesystem::path out_dir, int fd) : out_dir_(std::move(out_dir)), fd_(fd) {}
  void load();

  std::filesystem::path out_dir_;
  int fd_ = -1;  // results.jsonl, O_RDWR | O_APPEND
  std::vector<RunRecord> records_;
  std::set<std::string> names_;
  std::vector<std::string> notes_;
};

}  // namespace qjoule::bench

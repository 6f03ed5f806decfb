// The sweep's progress on stderr, one line per run: "[ 3/12] <run name> ... p50 4.21 ms, 237.5 seq/s,
// 0.0131 J/inference, accuracy 0.8222 (ETA 1m20s)", a decoder run's prefill and decode speeds, or
// "failed: <error>".
#pragma once

#include <string>

#include "qjoule/bench/sweep_loop.h"

namespace qjoule::bench {

class ConsoleReporter final : public SweepReporter {
 public:
  // `where` names the store in the resume line ("OUT/results.jsonl", or a Slurm task's shard).
  explicit ConsoleReporter(std::string where) : where_(std::move(where)) {}
  void sweep_started(std::size_t total, std::size_t already) override;
  void run_started(std::size_t index, std::size_t total, const std::string& run_name) override;
  void run_finished(const RunRecord& record, std::size_t done, std::size_t to_run, double eta_s) override;
  void run_aborted() override;

 private:
  std::string where_;
};

// "45s", "3m07s".
std::string format_duration(double seconds);

}  // namespace qjoule::bench

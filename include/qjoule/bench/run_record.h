// The one flat record of one benchmark run: what ran, how long it took, the energy it used, how big
// the model was, how accurate it stayed. One JSON line per run in results.jsonl; the CSV and the
// paper table are projections of the same keys. Every key, type, unit and null is documented in
// docs/bench-records.md and checked by docs/bench-record.schema.json.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/latency_stats.h"
#include "qjoule/bench/run_config.h"

namespace qjoule::bench {

inline constexpr int kRunRecordSchemaVersion = 1;

struct RunRecord {
  int schema_version = kRunRecordSchemaVersion;
  std::string run_name;
  std::string start_time;  // ISO 8601 UTC, e.g. 2026-11-23T19:45:02Z (iso8601_utc)
  RunConfig config;
  std::string status = "ok";  // "ok" or "failed"
  std::string error;          // one line, when failed
  nlohmann::json environment = nlohmann::json::object();  // cpu, cores, isa, os, compiler, qjoule version/commit
  std::vector<std::string> kernel_paths;                  // "int8 onednn:...:u8s8s32 x30"
  bool not_representative = false;  // emulated formats: speed and energy not representative
  std::size_t warmup_iters = 0, iters = 0;
  std::optional<LatencyStats> latency;  // per batch
  double measured_seconds = 0;
  std::optional<double> sequences_per_s, tokens_per_s;
  // Energy: the measurement window as energy::to_json gives it (opaque here), plus derived figures.
  nlohmann::json energy_window;           // null when no window
  std::optional<double> energy_j;         // total gross J over the measured iterations
  std::optional<double> net_energy_j;     // energy_j minus the idle baseline
  std::optional<double> j_per_inference;  // per sequence, net when an idle baseline was measured else gross
  std::optional<double> mj_per_token;
  std::optional<double> mean_power_w, peak_power_w;
  std::string energy_method;       // e.g. "counter rapl:package-0 (net of idle)", "estimated: cpu-tdp=65 x utilisation"
  std::string energy_unavailable;  // the reason, when energy_j is absent
  std::uint64_t model_bytes = 0, fp32_bytes = 0;  // as held in memory
  std::optional<std::uint64_t> peak_rss_bytes;
  std::optional<std::size_t> correct, labelled;  // task accuracy on a labelled dataset
  std::optional<double> accuracy;                // correct / labelled, 0..1
  std::optional<double> top1_agreement, mean_kl, max_abs_dlogit;  // fidelity to the FP32 run of the same model & shape
  std::size_t fidelity_examples = 0;
  std::vector<std::string> notes;
};

// Makes the record's energy unavailable for `reason`: every energy figure and the window cleared,
// energy_unavailable set (the invariant to_json checks: a reason exactly when there is no energy).
void clear_energy(RunRecord& record, std::string reason);

// Every key of a record's JSON, in the documented order (the CSV keeps this order).
inline constexpr std::array<std::string_view, 47> kRunRecordKeys = {
    "schema_version", "run_name", "start_time",
    "model", "device", "precision", "batch", "seq", "threads",
    "status", "error", "not_representative", "warmup_iters", "iters",
    "latency_count", "latency_mean_ms", "latency_std_ms", "latency_min_ms",
    "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms",
    "measured_seconds", "sequences_per_s", "tokens_per_s",
    "energy_j", "energy_net_j", "energy_j_per_inference", "energy_mj_per_token",
    "energy_mean_power_w", "energy_peak_power_w", "energy_method", "energy_unavailable",
    "model_bytes", "fp32_bytes", "peak_rss_bytes",
    "accuracy_correct", "accuracy_labelled", "accuracy",
    "fidelity_top1_agreement", "fidelity_mean_kl", "fidelity_max_abs_dlogit", "fidelity_examples",
    "kernel_paths", "notes", "environment", "energy_window"};

// One flat object with every key of kRunRecordKeys. Absent optionals are null; the energy figures
// also have a sibling reason, "energy_unavailable" (a string when energy_j is null, else null).
// `error` is null unless status is "failed"; `energy_method` is null when empty. A non-finite
// optional number is written as null (JSON has no NaN). A status other than "ok"/"failed", a
// non-finite measured_seconds or an energy_window that is neither an object nor null fails.
nlohmann::json to_json(const RunRecord& record);

// Reads what to_json wrote (round-trips). A schema_version other than kRunRecordSchemaVersion, a
// missing or unknown key, or a wrong type fails with a line naming the key, what was found and what
// was expected.
RunRecord run_record_from_json(const nlohmann::json& json);

// "2026-11-23T19:45:02Z": ISO 8601, UTC, whole seconds.
std::string iso8601_utc(std::chrono::system_clock::time_point time);

}  // namespace qjoule::bench

// The fields of a run record, in their documented order: each key (equal to the RunRecord member it
// reads, or to a member of its group: config's model..threads, latency's latency_*_ms), its JSON type,
// whether it may be null, and its unit. The key list (kRunRecordKeys: JSON, CSV columns), the
// record's readers and resets, docs/bench-records.md and docs/bench-record.schema.json all follow
// this table (tests compare the two documents with it, column by column).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

namespace qjoule::bench {

enum class FieldType { integer, number, string, boolean, strings, object };

struct RunRecordField {
  std::string_view key;
  FieldType type;
  bool nullable;
  std::string_view unit;  // "" for counts without a unit, names and flags
};

// clang-format off
inline constexpr std::array<RunRecordField, 101> kRunRecordFields = {{
    {"schema_version", FieldType::integer, false, ""},
    {"run_name", FieldType::string, false, ""},
    {"start_time", FieldType::string, false, ""},
    {"model", FieldType::string, false, ""},
    {"device", FieldType::string, false, ""},
    {"precision", FieldType::string, false, ""},
    {"batch", FieldType::integer, false, "sequences"},
    {"seq", FieldType::integer, false, "tokens"},
    {"threads", FieldType::integer, false, ""},
    {"status", FieldType::string, false, ""},
    {"error", FieldType::string, true, ""},
    {"not_representative", FieldType::boolean, false, ""},
    {"warmup_iters", FieldType::integer, false, ""},
    {"iters", FieldType::integer, false, ""},
    {"latency_count", FieldType::integer, true, ""},
    {"latency_mean_ms", FieldType::number, true, "ms"},
    {"latency_std_ms", FieldType::number, true, "ms"},
    {"latency_min_ms", FieldType::number, true, "ms"},
    {"latency_p50_ms", FieldType::number, true, "ms"},
    {"latency_p90_ms", FieldType::number, true, "ms"},
    {"latency_p99_ms", FieldType::number, true, "ms"},
    {"latency_max_ms", FieldType::number, true, "ms"},
    {"measured_seconds", FieldType::number, false, "s"},
    {"sequences_per_s", FieldType::number, true, "sequences/s"},
    {"tokens_per_s", FieldType::number, true, "tokens/s"},
    {"energy_j", FieldType::number, true, "J"},
    {"energy_net_j", FieldType::number, true, "J"},
    {"energy_j_per_inference", FieldType::number, true, "J/sequence"},
    {"energy_mj_per_token", FieldType::number, true, "mJ/token"},
    {"energy_mean_power_w", FieldType::number, true, "W"},
    {"energy_peak_power_w", FieldType::number, true, "W"},
    {"energy_method", FieldType::string, true, ""},
    {"energy_unavailable", FieldType::string, true, ""},
    {"model_bytes", FieldType::integer, false, "bytes"},
    {"fp32_bytes", FieldType::integer, false, "bytes"},
    {"peak_rss_bytes", FieldType::integer, true, "bytes"},
    {"accuracy_correct", FieldType::integer, true, ""},
    {"accuracy_labelled", FieldType::integer, true, ""},
    {"accuracy", FieldType::number, true, "fraction"},
    {"fidelity_top1_agreement", FieldType::number, true, "fraction"},
    {"fidelity_mean_kl", FieldType::number, true, "nats"},
    {"fidelity_max_abs_dlogit", FieldType::number, true, ""},
    {"fidelity_examples", FieldType::integer, false, ""},
    {"kernel_paths", FieldType::strings, false, ""},
    {"notes", FieldType::strings, false, ""},
    {"environment", FieldType::object, false, ""},
    {"energy_window", FieldType::object, true, ""},
    {"prefill_tokens", FieldType::integer, true, "tokens"},
    {"prefill_tokens_per_s_mean", FieldType::number, true, "tokens/s"},
    {"prefill_tokens_per_s_std", FieldType::number, true, "tokens/s"},
    {"prefill_mj_per_token", FieldType::number, true, "mJ/token"},
    {"decode_tokens", FieldType::integer, true, "tokens"},
    {"decode_iters", FieldType::integer, true, ""},
    {"decode_tokens_per_s_mean", FieldType::number, true, "tokens/s"},
    {"decode_tokens_per_s_std", FieldType::number, true, "tokens/s"},
    {"decode_ms_per_token_mean", FieldType::number, true, "ms"},
    {"decode_mj_per_token", FieldType::number, true, "mJ/token"},
    {"decode_energy_j", FieldType::number, true, "J"},
    {"decode_energy_unavailable", FieldType::string, true, ""},
    {"decode_energy_window", FieldType::object, true, ""},
    {"lm_text", FieldType::string, true, ""},
    {"lm_text_tokens", FieldType::integer, true, "tokens"},
    {"lm_ctx", FieldType::integer, true, "tokens"},
    {"lm_stride", FieldType::integer, true, "tokens"},
    {"lm_scored_tokens", FieldType::integer, true, "tokens"},
    {"lm_ppl", FieldType::number, true, ""},
    {"lm_ppl_stderr", FieldType::number, true, ""},
    {"lm_nll_mean", FieldType::number, true, "nats"},
    {"lm_base_ppl", FieldType::number, true, ""},
    {"lm_delta_ppl", FieldType::number, true, ""},
    {"lm_kl_mean", FieldType::number, true, "nats"},
    {"lm_kl_median", FieldType::number, true, "nats"},
    {"lm_kl_p99", FieldType::number, true, "nats"},
    {"lm_kl_max", FieldType::number, true, "nats"},
    {"lm_same_top_rate", FieldType::number, true, "fraction"},
    {"lm_rms_dp", FieldType::number, true, "fraction"},
    {"lm_kl_base", FieldType::string, true, ""},
    {"lm_unavailable", FieldType::string, true, ""},
    {"weights_source", FieldType::string, true, ""},
    {"roof_flops_per_token", FieldType::number, true, "FLOP/token"},
    {"roof_bytes_per_token", FieldType::number, true, "bytes/token"},
    {"roof_gflops", FieldType::number, true, "GFLOP/s"},
    {"roof_gb_per_s", FieldType::number, true, "GB/s"},
    {"roof_limit_gflops", FieldType::number, true, "GFLOP/s"},
    {"roof_fraction", FieldType::number, true, "fraction"},
    {"roof_bound", FieldType::string, true, ""},
    {"roof_unavailable", FieldType::string, true, ""},
    {"decode_roof_flops_per_token", FieldType::number, true, "FLOP/token"},
    {"decode_roof_bytes_per_token", FieldType::number, true, "bytes/token"},
    {"decode_roof_gb_per_s", FieldType::number, true, "GB/s"},
    {"decode_roof_fraction", FieldType::number, true, "fraction"},
    {"decode_roof_bound", FieldType::string, true, ""},
    {"calibration_tokens", FieldType::integer, true, "tokens"},
    {"calibration_damp", FieldType::number, true, ""},
    {"calibration_seconds", FieldType::number, true, "s"},
    {"tasks", FieldType::object, true, ""},
    {"head_format", FieldType::string, true, ""},
    {"head_bytes", FieldType::integer, true, "bytes"},
    {"engine", FieldType::string, true, ""},
    {"lm_delta_ppl_stderr", FieldType::number, true, ""},
    {"lm_kl_stderr", FieldType::number, true, "nats"},
}};
// clang-format on

// The keys alone, in the same order.
inline constexpr std::array<std::string_view, kRunRecordFields.size()> kRunRecordKeys = [] {
  std::array<std::string_view, kRunRecordFields.size()> keys{};
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = kRunRecordFields[i].key;
  return keys;
}();

}  // namespace qjoule::bench

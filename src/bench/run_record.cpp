#include "qjoule/bench/run_record.h"

#include <cmath>
#include <ctime>
#include <span>
#include <type_traits>

#include <fmt/format.h>

#include "bench/json_fields.h"
#include "bench/run_config_reader.h"
#include "qjoule/error.h"

namespace qjoule::bench {
namespace {

using detail::JsonPlace;

nlohmann::json number_or_null(const std::optional<double>& value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  return *value;
}

template <class Integer>
nlohmann::json integer_or_null(const std::optional<Integer>& value) {
  if (!value) return nullptr;
  return *value;
}

nlohmann::json string_or_null(const std::string& value) {
  if (value.empty()) return nullptr;
  return value;
}

double finite(double value, std::string_view key) {
  if (!std::isfinite(value)) fail("run record: {} is {}, expected a finite number", key, value);
  return value;
}

// Reads one record object; every key is required (null where the value is absent).
class RecordReader {
 public:
  explicit RecordReader(const nlohmann::json& object) : object_(object) {}

  const nlohmann::json& at(std::string_view key) const { return detail::required_member(object_, place_, key); }
  JsonPlace place(std::string_view key) const { return place_.child(key); }

  std::string string(std::string_view key) const { return detail::read_string(at(key), place(key)); }
  std::string string_or_empty(std::string_view key) const { return at(key).is_null() ? std::string() : string(key); }
  double number(std::string_view key) const { return detail::read_number(at(key), place(key)); }
  std::optional<double> optional_number(std::string_view key) const {
    if (at(key).is_null()) return std::nullopt;
    return number(key);
  }
  std::uint64_t unsigned_integer(std::string_view key) const { return detail::read_unsigned(at(key), place(key)); }
  std::optional<std::uint64_t> optional_unsigned(std::string_view key) const {
    if (at(key).is_null()) return std::nullopt;
    return unsigned_integer(key);
  }
  bool boolean(std::string_view key) const { return detail::read_bool(at(key), place(key)); }
  std::vector<std::string> strings(std::string_view key) const {
    return detail::read_string_array(at(key), place(key));
  }

 private:
  const nlohmann::json& object_;
  JsonPlace place_{"run record", ""};
};

constexpr std::string_view kLatencyKeys[] = {"latency_count",  "latency_mean_ms", "latency_std_ms", "latency_min_ms",
                                             "latency_p50_ms", "latency_p90_ms",  "latency_p99_ms", "latency_max_ms"};

// The record's optional numbers and counts, by key (members named as their keys). `energy` marks the
// figures a window measures: what clear_energy empties.
struct OptionalNumberField {
  std::string_view key;
  std::optional<double> RunRecord::*member;
  bool energy;
};
constexpr OptionalNumberField kOptionalNumbers[] = {
    {"sequences_per_s", &RunRecord::sequences_per_s, false},
    {"tokens_per_s", &RunRecord::tokens_per_s, false},
    {"energy_j", &RunRecord::energy_j, true},
    {"energy_net_j", &RunRecord::energy_net_j, true},
    {"energy_j_per_inference", &RunRecord::energy_j_per_inference, true},
    {"energy_mj_per_token", &RunRecord::energy_mj_per_token, true},
    {"energy_mean_power_w", &RunRecord::energy_mean_power_w, true},
    {"energy_peak_power_w", &RunRecord::energy_peak_power_w, true},
    {"accuracy", &RunRecord::accuracy, false},
    {"fidelity_top1_agreement", &RunRecord::fidelity_top1_agreement, false},
    {"fidelity_mean_kl", &RunRecord::fidelity_mean_kl, false},
    {"fidelity_max_abs_dlogit", &RunRecord::fidelity_max_abs_dlogit, false},
    {"prefill_tokens_per_s_mean", &RunRecord::prefill_tokens_per_s_mean, false},
    {"prefill_tokens_per_s_std", &RunRecord::prefill_tokens_per_s_std, false},
    {"prefill_mj_per_token", &RunRecord::prefill_mj_per_token, true},
    {"decode_tokens_per_s_mean", &RunRecord::decode_tokens_per_s_mean, false},
    {"decode_tokens_per_s_std", &RunRecord::decode_tokens_per_s_std, false},
    {"decode_ms_per_token_mean", &RunRecord::decode_ms_per_token_mean, false},
    {"decode_mj_per_token", &RunRecord::decode_mj_per_token, true},
    {"decode_energy_j", &RunRecord::decode_energy_j, true},
    {"roof_flops_per_token", &RunRecord::roof_flops_per_token, false},
    {"roof_bytes_per_token", &RunRecord::roof_bytes_per_token, false},
    {"roof_gflops", &RunRecord::roof_gflops, false},
    {"roof_gb_per_s", &RunRecord::roof_gb_per_s, false},
    {"roof_limit_gflops", &RunRecord::roof_limit_gflops, false},
    {"roof_fraction", &RunRecord::roof_fraction, false},
    {"decode_roof_flops_per_token", &RunRecord::decode_roof_flops_per_token, false},
    {"decode_roof_bytes_per_token", &RunRecord::decode_roof_bytes_per_token, false},
    {"decode_roof_gb_per_s", &RunRecord::decode_roof_gb_per_s, false},
    {"decode_roof_fraction", &RunRecord::decode_roof_fraction, false},
    {"lm_ppl", &RunRecord::lm_ppl, false},
    {"lm_ppl_stderr", &RunRecord::lm_ppl_stderr, false},
    {"lm_nll_mean", &RunRecord::lm_nll_mean, false},
    {"lm_base_ppl", &RunRecord::lm_base_ppl, false},
    {"lm_delta_ppl", &RunRecord::lm_delta_ppl, false},
    {"lm_delta_ppl_stderr", &RunRecord::lm_delta_ppl_stderr, false},
    {"lm_kl_stderr", &RunRecord::lm_kl_stderr, false},
    {"lm_kl_mean", &RunRecord::lm_kl_mean, false},
    {"lm_kl_median", &RunRecord::lm_kl_median, false},
    {"lm_kl_p99", &RunRecord::lm_kl_p99, false},
    {"lm_kl_max", &RunRecord::lm_kl_max, false},
    {"lm_same_top_rate", &RunRecord::lm_same_top_rate, false},
    {"lm_rms_dp", &RunRecord::lm_rms_dp, false},
    {"calibration_damp", &RunRecord::calibration_damp, false},
    {"calibration_seconds", &RunRecord::calibration_seconds, false},
};

static_assert(std::is_same_v<std::uint64_t, std::size_t>, "peak_rss_bytes shares the counts' table");
struct OptionalCountField {
  std::string_view key;
  std::optional<std::size_t> RunRecord::*member;
};
constexpr OptionalCountField kOptionalCounts[] = {
    {"peak_rss_bytes", &RunRecord::peak_rss_bytes},
    {"accuracy_correct", &RunRecord::accuracy_correct},
    {"accuracy_labelled", &RunRecord::accuracy_labelled},
    {"prefill_tokens", &RunRecord::prefill_tokens},
    {"decode_tokens", &RunRecord::decode_tokens},
    {"decode_iters", &RunRecord::decode_iters},
    {"lm_text_tokens", &RunRecord::lm_text_tokens},
    {"lm_ctx", &RunRecord::lm_ctx},
    {"lm_stride", &RunRecord::lm_stride},
    {"lm_scored_tokens", &RunRecord::lm_scored_tokens},
    {"calibration_tokens", &RunRecord::calibration_tokens},
    {"head_bytes", &RunRecord::head_bytes},
};

// The record's optional strings: "" is written as null.
struct OptionalStringField {
  std::string_view key;
  std::string RunRecord::*member;
};
constexpr OptionalStringField kOptionalStrings[] = {
    {"lm_text", &RunRecord::lm_text},
    {"lm_kl_base", &RunRecord::lm_kl_base},
    {"weights_source", &RunRecord::weights_source},
    {"roof_bound", &RunRecord::roof_bound},
    {"decode_roof_bound", &RunRecord::decode_roof_bound},
    {"head_format", &RunRecord::head_format},
    {"engine", &RunRecord::engine},
};

// The number of keys each schema version has (its keys are the first ones of kRunRecordKeys).
constexpr std::size_t keys_of_version(std::int64_t version) {
  return version == 1   ? kRunRecordKeysV1
         : version == 2 ? kRunRecordKeysV2
         : version == 3 ? kRunRecordKeysV3
         : version == 4 ? kRunRecordKeysV4
         : version == 5 ? kRunRecordKeysV5
         : version == 6 ? kRunRecordKeysV6
         : version == 7 ? kRunRecordKeysV7
                        : kRunRecordKeys.size();
}

// Whether records of `version` have `key` (the keys added since read as null from older records).
constexpr bool in_version(std::int64_t version, std::string_view key) {
  for (std::size_t i = 0; i < keys_of_version(version); ++i)
    if (kRunRecordKeys[i] == key) return true;
  return false;
}

// Every optional number and count of the tables above is a key of the field table, with its type.
constexpr bool tables_match_the_field_table() {
  const auto type_of = [](std::string_view key) {
    for (const auto& f : kRunRecordFields)
      if (f.key == key) return f.nullable ? static_cast<int>(f.type) : -1;
    return -2;
  };
  for (const auto& f : kOptionalNumbers)
    if (type_of(f.key) != static_cast<int>(FieldType::number)) return false;
  for (const auto& f : kOptionalCounts)
    if (type_of(f.key) != static_cast<int>(FieldType::integer)) return false;
  for (const auto& f : kOptionalStrings)
    if (type_of(f.key) != static_cast<int>(FieldType::string)) return false;
  return true;
}
static_assert(tables_match_the_field_table(), "kOptionalNumbers / kOptionalCounts must follow kRunRecordFields");

}  // namespace

nlohmann::json to_json(const RunRecord& record) {
  if (record.status != "ok" && record.status != "failed")
    fail("run record '{}': status '{}', expected \"ok\" or \"failed\"", record.run_name, record.status);
  if (!record.energy_window.is_null() && !record.energy_window.is_object())
    fail("run record '{}': energy_window is {}, expected an object or null", record.run_name,
         detail::describe_json(record.energy_window));
  if (!record.decode_energy_window.is_null() && !record.decode_energy_window.is_object())
    fail("run record '{}': decode_energy_window is {}, expected an object or null", record.run_name,
         detail::describe_json(record.decode_energy_window));
  if (!record.tasks.is_null() && !record.tasks.is_object())
    fail("run record '{}': tasks is {}, expected an object or null", record.run_name,
         detail::describe_json(record.tasks));
  if (!record.environment.is_object())
    fail("run record '{}': environment is {}, expected an object", record.run_name,
         detail::describe_json(record.environment));

  nlohmann::json j = nlohmann::json::object();
  j["schema_version"] = record.schema_version;
  j["run_name"] = record.run_name;
  j["start_time"] = record.start_time;
  const nlohmann::json config = to_json(record.config);  // named: items() must not outlive it
  for (const auto& item : config.items()) j[item.key()] = item.value();
  j["status"] = record.status;
  j["error"] = record.status == "failed"
                   ? nlohmann::json(record.error.empty() ? "failed (no error recorded)" : record.error)
                   : nlohmann::json(nullptr);
  j["not_representative"] = record.not_representative;
  j["warmup_iters"] = record.warmup_iters;
  j["iters"] = record.iters;

  for (auto key : kLatencyKeys) j[std::string(key)] = nullptr;
  if (const auto& l = record.latency) {
    j["latency_count"] = l->count;
    j["latency_mean_ms"] = finite(l->mean_ms, "latency_mean_ms");
    j["latency_std_ms"] = finite(l->std_ms, "latency_std_ms");
    j["latency_min_ms"] = finite(l->min_ms, "latency_min_ms");
    j["latency_p50_ms"] = finite(l->p50_ms, "latency_p50_ms");
    j["latency_p90_ms"] = finite(l->p90_ms, "latency_p90_ms");
    j["latency_p99_ms"] = finite(l->p99_ms, "latency_p99_ms");
    j["latency_max_ms"] = finite(l->max_ms, "latency_max_ms");
  }
  j["measured_seconds"] = finite(record.measured_seconds, "measured_seconds");
  for (const auto& f : kOptionalNumbers) j[std::string(f.key)] = number_or_null(record.*f.member);
  for (const auto& f : kOptionalCounts) j[std::string(f.key)] = integer_or_null(record.*f.member);
  j["energy_method"] = string_or_null(record.energy_method);
  // The reason sits beside the null it explains; a null with no reason would read as "forgot".
  j["energy_unavailable"] = j["energy_j"].is_null()
                                ? nlohmann::json(record.energy_unavailable.empty() ? "not measured (no reason recorded)"
                                                                                   : record.energy_unavailable)
                                : nlohmann::json(nullptr);

  j["model_bytes"] = record.model_bytes;
  j["fp32_bytes"] = record.fp32_bytes;
  j["fidelity_examples"] = record.fidelity_examples;
  j["kernel_paths"] = record.kernel_paths;
  j["notes"] = record.notes;
  j["environment"] = record.environment;
  j["energy_window"] = record.energy_window;

  // As energy_unavailable: a decode phase without energy says why; an encoder run has no decode phase.
  j["decode_energy_unavailable"] =
      record.decode_tokens && j["decode_energy_j"].is_null()
          ? nlohmann::json(record.decode_energy_unavailable.empty() ? "not measured (no reason recorded)"
                                                                    : record.decode_energy_unavailable)
          : nlohmann::json(nullptr);
  j["decode_energy_window"] = record.decode_energy_window;
  j["tasks"] = record.tasks;
  for (const auto& f : kOptionalStrings) j[std::string(f.key)] = string_or_null(record.*f.member);
  // As decode_energy_unavailable: a decoder run without a perplexity says why.
  j["lm_unavailable"] =
      record.decode_tokens && j["lm_ppl"].is_null()
          ? nlohmann::json(record.lm_unavailable.empty() ? "not measured (no reason recorded)" : record.lm_unavailable)
          : nlohmann::json(nullptr);
  // As energy_unavailable: a run without a roof fraction says why.
  j["roof_unavailable"] = j["roof_fraction"].is_null()
                              ? nlohmann::json(record.roof_unavailable.empty() ? "not measured (no reason recorded)"
                                                                               : record.roof_unavailable)
                              : nlohmann::json(nullptr);
  return j;
}

RunRecord run_record_from_json(const nlohmann::json& json) {
  const JsonPlace top{"run record", ""};
  if (!json.is_object()) fail("run record is {}, expected an object", detail::describe_json(json));
  // The version first: a record from another schema fails on that, not on its first odd key.
  const auto version = json.find("schema_version");
  if (version == json.end()) fail("run record: missing key 'schema_version', expected {}", kRunRecordSchemaVersion);
  const bool readable = version->is_number_integer() &&
                        version->get<std::int64_t>() >= kOldestReadableRunRecordSchemaVersion &&
                        version->get<std::int64_t>() <= kRunRecordSchemaVersion;
  if (!readable)
    fail("run record: schema_version {}, expected {} to {} (written by another qjoule version)", version->dump(),
         kOldestReadableRunRecordSchemaVersion, kRunRecordSchemaVersion);
  // An older record has exactly the keys its version had; the ones added since read as null.
  const std::int64_t v = version->get<std::int64_t>();
  const bool v1 = v == 1;
  const std::span<const std::string_view> keys(kRunRecordKeys.data(), keys_of_version(v));
  detail::require_object_with_keys(json, top, keys);

  const RecordReader r(json);
  RunRecord record;
  record.run_name = r.string("run_name");
  record.start_time = r.string("start_time");
  for (auto key : kRunConfigKeys) detail::read_run_config_field(record.config, key, r.at(key), r.place(key));
  record.status = r.string("status");
  if (record.status != "ok" && record.status != "failed")
    fail("run record: status \"{}\", expected \"ok\" or \"failed\"", record.status);
  record.error = r.string_or_empty("error");
  record.not_representative = r.boolean("not_representative");
  record.warmup_iters = r.unsigned_integer("warmup_iters");
  record.iters = r.unsigned_integer("iters");

  std::size_t latency_nulls = 0;
  for (auto key : kLatencyKeys) latency_nulls += r.at(key).is_null() ? 1 : 0;
  if (latency_nulls != 0 && latency_nulls != std::size(kLatencyKeys))
    fail("run record: {} of the {} latency_* keys are null, expected all or none", latency_nulls,
         std::size(kLatencyKeys));
  if (latency_nulls == 0) {
    LatencyStats l;
    l.count = r.unsigned_integer("latency_count");
    l.mean_ms = r.number("latency_mean_ms");
    l.std_ms = r.number("latency_std_ms");
    l.min_ms = r.number("latency_min_ms");
    l.p50_ms = r.number("latency_p50_ms");
    l.p90_ms = r.number("latency_p90_ms");
    l.p99_ms = r.number("latency_p99_ms");
    l.max_ms = r.number("latency_max_ms");
    record.latency = l;
  }
  record.measured_seconds = r.number("measured_seconds");
  for (const auto& f : kOptionalNumbers)
    if (in_version(v, f.key)) record.*f.member = r.optional_number(f.key);
  for (const auto& f : kOptionalCounts)
    if (in_version(v, f.key)) record.*f.member = r.optional_unsigned(f.key);
  for (const auto& f : kOptionalStrings)
    if (in_version(v, f.key)) record.*f.member = r.string_or_empty(f.key);
  if (in_version(v, "lm_unavailable")) record.lm_unavailable = r.string_or_empty("lm_unavailable");
  if (in_version(v, "roof_unavailable")) record.roof_unavailable = r.string_or_empty("roof_unavailable");
  record.energy_method = r.string_or_empty("energy_method");
  record.energy_unavailable = r.string_or_empty("energy_unavailable");

  record.model_bytes = r.unsigned_integer("model_bytes");
  record.fp32_bytes = r.unsigned_integer("fp32_bytes");
  record.fidelity_examples = r.unsigned_integer("fidelity_examples");
  record.kernel_paths = r.strings("kernel_paths");
  record.notes = r.strings("notes");

  const auto& environment = r.at("environment");
  if (!environment.is_object())
    fail("run record: environment is {}, expected an object", detail::describe_json(environment));
  record.environment = environment;
  const auto& window = r.at("energy_window");
  if (!window.is_null() && !window.is_object())
    fail("run record: energy_window is {}, expected an object or null", detail::describe_json(window));
  record.energy_window = window;

  if (!v1) {
    record.decode_energy_unavailable = r.string_or_empty("decode_energy_unavailable");
    const auto& decode_window = r.at("decode_energy_window");
    if (!decode_window.is_null() && !decode_window.is_object())
      fail("run record: decode_energy_window is {}, expected an object or null", detail::describe_json(decode_window));
    record.decode_energy_window = decode_window;
  }
  if (in_version(v, "tasks")) {
    const auto& tasks = r.at("tasks");
    if (!tasks.is_null() && !tasks.is_object())
      fail("run record: tasks is {}, expected an object or null", detail::describe_json(tasks));
    record.tasks = tasks;
  }
  return record;
}

std::string iso8601_utc(std::chrono::system_clock::time_point time) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  const auto length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, length);
}

void clear_energy(RunRecord& record, std::string reason) {
  record.energy_window = nullptr;
  record.decode_energy_window = nullptr;
  for (const auto& f : kOptionalNumbers)
    if (f.energy) (record.*f.member).reset();
  record.energy_method.clear();
  record.decode_energy_unavailable = record.decode_tokens ? reason : std::string();
  record.energy_unavailable = std::move(reason);
}

namespace {
const nlohmann::json* host_capacity_of(const RunRecord& r) {
  const auto it = r.environment.find("host_capacity");
  return it == r.environment.end() || !it->is_object() ? nullptr : &*it;
}
}  // namespace

std::string busy_host(const RunRecord& r) {
  const nlohmann::json* h = host_capacity_of(r);
  if (h == nullptr) return "";
  const auto busy = h->find("busy");
  return busy != h->end() && busy->is_string() ? busy->get<std::string>() : "";
}

std::optional<double> decode_roof_fraction_beside(const RunRecord& r) {
  const nlohmann::json* h = host_capacity_of(r);
  if (h == nullptr) return std::nullopt;
  const auto beside = h->find("decode_roof_fraction_beside");
  return beside != h->end() && beside->is_number() ? std::optional(beside->get<double>()) : std::nullopt;
}

std::optional<double> host_delivered_fraction(const RunRecord& r) {
  const nlohmann::json* h = host_capacity_of(r);
  if (h == nullptr) return std::nullopt;
  const auto share = h->find("delivered_fraction");
  return share != h->end() && share->is_number() ? std::optional(share->get<double>()) : std::nullopt;
}

}  // namespace qjoule::bench

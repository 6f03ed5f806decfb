#include "qjoule/bench/run_record.h"

#include <cmath>
#include <ctime>
#include <span>

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
  j["sequences_per_s"] = number_or_null(record.sequences_per_s);
  j["tokens_per_s"] = number_or_null(record.tokens_per_s);

  j["energy_j"] = number_or_null(record.energy_j);
  j["energy_net_j"] = number_or_null(record.net_energy_j);
  j["energy_j_per_inference"] = number_or_null(record.j_per_inference);
  j["energy_mj_per_token"] = number_or_null(record.mj_per_token);
  j["energy_mean_power_w"] = number_or_null(record.mean_power_w);
  j["energy_peak_power_w"] = number_or_null(record.peak_power_w);
  j["energy_method"] = string_or_null(record.energy_method);
  // The reason sits beside the null it explains; a null with no reason would read as "forgot".
  j["energy_unavailable"] = j["energy_j"].is_null()
                                ? nlohmann::json(record.energy_unavailable.empty() ? "not measured (no reason recorded)"
                                                                                   : record.energy_unavailable)
                                : nlohmann::json(nullptr);

  j["model_bytes"] = record.model_bytes;
  j["fp32_bytes"] = record.fp32_bytes;
  j["peak_rss_bytes"] = integer_or_null(record.peak_rss_bytes);
  j["accuracy_correct"] = integer_or_null(record.correct);
  j["accuracy_labelled"] = integer_or_null(record.labelled);
  j["accuracy"] = number_or_null(record.accuracy);
  j["fidelity_top1_agreement"] = number_or_null(record.top1_agreement);
  j["fidelity_mean_kl"] = number_or_null(record.mean_kl);
  j["fidelity_max_abs_dlogit"] = number_or_null(record.max_abs_dlogit);
  j["fidelity_examples"] = record.fidelity_examples;
  j["kernel_paths"] = record.kernel_paths;
  j["notes"] = record.notes;
  j["environment"] = record.environment;
  j["energy_window"] = record.energy_window;

  j["prefill_tokens"] = integer_or_null(record.prefill_tokens);
  j["prefill_tokens_per_s_mean"] = number_or_null(record.prefill_tokens_per_s_mean);
  j["prefill_tokens_per_s_std"] = number_or_null(record.prefill_tokens_per_s_std);
  j["prefill_mj_per_token"] = number_or_null(record.prefill_mj_per_token);
  j["decode_tokens"] = integer_or_null(record.decode_tokens);
  j["decode_iters"] = integer_or_null(record.decode_iters);
  j["decode_tokens_per_s_mean"] = number_or_null(record.decode_tokens_per_s_mean);
  j["decode_tokens_per_s_std"] = number_or_null(record.decode_tokens_per_s_std);
  j["decode_ms_per_token_mean"] = number_or_null(record.decode_ms_per_token_mean);
  j["decode_mj_per_token"] = number_or_null(record.decode_mj_per_token);
  j["decode_energy_j"] = number_or_null(record.decode_energy_j);
  // As energy_unavailable: a decode phase without energy says why; an encoder run has no decode phase.
  j["decode_energy_unavailable"] =
      record.decode_tokens && j["decode_energy_j"].is_null()
          ? nlohmann::json(record.decode_energy_unavailable.empty() ? "not measured (no reason recorded)"
                                                                    : record.decode_energy_unavailable)
          : nlohmann::json(nullptr);
  j["decode_energy_window"] = record.decode_energy_window;
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
  // A version-1 record has exactly the keys version 1 had; the ones added since read as null.
  const bool v1 = version->get<std::int64_t>() == 1;
  const std::span<const std::string_view> keys =
      v1 ? std::span<const std::string_view>(kRunRecordKeys.data(), kRunRecordKeysV1)
         : std::span<const std::string_view>(kRunRecordKeys);
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
  record.sequences_per_s = r.optional_number("sequences_per_s");
  record.tokens_per_s = r.optional_number("tokens_per_s");

  record.energy_j = r.optional_number("energy_j");
  record.net_energy_j = r.optional_number("energy_net_j");
  record.j_per_inference = r.optional_number("energy_j_per_inference");
  record.mj_per_token = r.optional_number("energy_mj_per_token");
  record.mean_power_w = r.optional_number("energy_mean_power_w");
  record.peak_power_w = r.optional_number("energy_peak_power_w");
  record.energy_method = r.string_or_empty("energy_method");
  record.energy_unavailable = r.string_or_empty("energy_unavailable");

  record.model_bytes = r.unsigned_integer("model_bytes");
  record.fp32_bytes = r.unsigned_integer("fp32_bytes");
  record.peak_rss_bytes = r.optional_unsigned("peak_rss_bytes");
  record.correct = r.optional_unsigned("accuracy_correct");
  record.labelled = r.optional_unsigned("accuracy_labelled");
  record.accuracy = r.optional_number("accuracy");
  record.top1_agreement = r.optional_number("fidelity_top1_agreement");
  record.mean_kl = r.optional_number("fidelity_mean_kl");
  record.max_abs_dlogit = r.optional_number("fidelity_max_abs_dlogit");
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
    record.prefill_tokens = r.optional_unsigned("prefill_tokens");
    record.prefill_tokens_per_s_mean = r.optional_number("prefill_tokens_per_s_mean");
    record.prefill_tokens_per_s_std = r.optional_number("prefill_tokens_per_s_std");
    record.prefill_mj_per_token = r.optional_number("prefill_mj_per_token");
    record.decode_tokens = r.optional_unsigned("decode_tokens");
    record.decode_iters = r.optional_unsigned("decode_iters");
    record.decode_tokens_per_s_mean = r.optional_number("decode_tokens_per_s_mean");
    record.decode_tokens_per_s_std = r.optional_number("decode_tokens_per_s_std");
    record.decode_ms_per_token_mean = r.optional_number("decode_ms_per_token_mean");
    record.decode_mj_per_token = r.optional_number("decode_mj_per_token");
    record.decode_energy_j = r.optional_number("decode_energy_j");
    record.decode_energy_unavailable = r.string_or_empty("decode_energy_unavailable");
    const auto& decode_window = r.at("decode_energy_window");
    if (!decode_window.is_null() && !decode_window.is_object())
      fail("run record: decode_energy_window is {}, expected an object or null", detail::describe_json(decode_window));
    record.decode_energy_window = decode_window;
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
  record.energy_j.reset();
  record.net_energy_j.reset();
  record.j_per_inference.reset();
  record.mj_per_token.reset();
  record.mean_power_w.reset();
  record.peak_power_w.reset();
  record.energy_method.clear();
  record.prefill_mj_per_token.reset();
  record.decode_energy_window = nullptr;
  record.decode_energy_j.reset();
  record.decode_mj_per_token.reset();
  record.decode_energy_unavailable = record.decode_tokens ? reason : std::string();
  record.energy_unavailable = std::move(reason);
}

}  // namespace qjoule::bench

// The flat run record: round trip, nulls and reasons, strict reading, and validation against
// docs/bench-record.schema.json (and that docs/bench-records.md documents every key).
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_of.h"

#include "json_schema_subset.h"
#include "qjoule/bench/run_record.h"
#include "qjoule/error.h"
#include "record_examples.h"

namespace qjoule::bench {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

using test::error_of;

std::string read_text(const char* path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const nlohmann::json& schema() {
  static const nlohmann::json s = nlohmann::json::parse(read_text(QJOULE_BENCH_RECORD_SCHEMA));
  return s;
}

// Through text, as results.jsonl stores it.
RunRecord through_text(const RunRecord& record) {
  return run_record_from_json(nlohmann::json::parse(to_json(record).dump()));
}

TEST(BenchRunRecord, JsonHasExactlyTheDocumentedKeys) {
  const auto json = to_json(examples::full_record());
  std::set<std::string> keys;
  for (const auto& item : json.items()) keys.insert(item.key());
  EXPECT_EQ(keys, std::set<std::string>(kRunRecordKeys.begin(), kRunRecordKeys.end()));
  EXPECT_EQ(keys.size(), kRunRecordKeys.size());
  EXPECT_EQ(json["latency_p50_ms"], 4.0);
  EXPECT_EQ(json["precision"], "int8");
  EXPECT_EQ(json["batch"], 8);
  EXPECT_EQ(json["energy_j_per_inference"], 2.1 / 160);
  EXPECT_TRUE(json["energy_unavailable"].is_null());
  EXPECT_TRUE(json["error"].is_null());
}

TEST(BenchRunRecord, RoundTrips) {
  for (const auto& record : {examples::full_record(), examples::energy_unavailable_record(), examples::failed_record(),
                             examples::decoder_record()}) {
    const auto back = through_text(record);
    EXPECT_EQ(to_json(back), to_json(record)) << record.run_name;
    EXPECT_EQ(back.config.precision, record.config.precision);
    EXPECT_EQ(back.latency.has_value(), record.latency.has_value());
    EXPECT_EQ(back.energy_j, record.energy_j);
    EXPECT_EQ(back.energy_unavailable, record.energy_unavailable);
    EXPECT_EQ(back.error, record.error);
    EXPECT_EQ(back.accuracy_correct, record.accuracy_correct);
    EXPECT_EQ(back.notes, record.notes);
    EXPECT_EQ(back.environment, record.environment);
    EXPECT_EQ(back.energy_window, record.energy_window);
  }
  const auto full = through_text(examples::full_record());
  ASSERT_TRUE(full.latency);
  EXPECT_EQ(full.latency->p99_ms, 6.0);
  EXPECT_EQ(full.tokens_per_s, 1882.35 * 128);  // doubles survive the text exactly
}

TEST(BenchRunRecord, EncoderRunsHaveNullPhaseKeys) {
  const auto json = to_json(examples::full_record());
  EXPECT_EQ(json["schema_version"], kRunRecordSchemaVersion);
  for (std::size_t k = kRunRecordKeysV1; k < kRunRecordKeys.size(); ++k) {
    if (kRunRecordKeys[k] != "roof_unavailable") {
      EXPECT_TRUE(json[std::string(kRunRecordKeys[k])].is_null()) << kRunRecordKeys[k];
    }
  }
  // Without a roof fraction, the reason beside it (as energy_unavailable).
  EXPECT_EQ(json["roof_unavailable"], "not measured (no reason recorded)");
}

TEST(BenchRunRecord, DecoderPhaseFieldsRoundTrip) {
  const RunRecord record = examples::decoder_record();
  const auto json = to_json(record);
  EXPECT_EQ(json["prefill_tokens"], 64);
  EXPECT_EQ(json["prefill_tokens_per_s_mean"], 128'500.25);
  EXPECT_EQ(json["prefill_tokens_per_s_std"], 3'100.5);
  EXPECT_EQ(json["prefill_mj_per_token"], json["energy_mj_per_token"]);
  EXPECT_EQ(json["decode_tokens"], 32);
  EXPECT_EQ(json["decode_iters"], 25);
  EXPECT_EQ(json["decode_tokens_per_s_mean"], 7'700.125);
  EXPECT_EQ(json["decode_tokens_per_s_std"], 165.5);
  EXPECT_EQ(json["decode_ms_per_token_mean"], 0.13);
  EXPECT_EQ(json["decode_energy_j"], 4.2);
  EXPECT_EQ(json["decode_mj_per_token"], 2.6 * 1e3 / (25 * 32));
  EXPECT_TRUE(json["decode_energy_unavailable"].is_null());
  EXPECT_EQ(json["decode_energy_window"]["name"], "decode");

  const RunRecord back = through_text(record);
  EXPECT_EQ(back.prefill_tokens, record.prefill_tokens);
  EXPECT_EQ(back.prefill_tokens_per_s_mean, record.prefill_tokens_per_s_mean);
  EXPECT_EQ(back.prefill_tokens_per_s_std, record.prefill_tokens_per_s_std);
  EXPECT_EQ(back.prefill_mj_per_token, record.prefill_mj_per_token);
  EXPECT_EQ(back.decode_tokens, record.decode_tokens);
  EXPECT_EQ(back.decode_iters, record.decode_iters);
  EXPECT_EQ(back.decode_tokens_per_s_mean, record.decode_tokens_per_s_mean);
  EXPECT_EQ(back.decode_tokens_per_s_std, record.decode_tokens_per_s_std);
  EXPECT_EQ(back.decode_ms_per_token_mean, record.decode_ms_per_token_mean);
  EXPECT_EQ(back.decode_mj_per_token, record.decode_mj_per_token);
  EXPECT_EQ(back.decode_energy_j, record.decode_energy_j);
  EXPECT_EQ(back.decode_energy_window, record.decode_energy_window);
  EXPECT_EQ(to_json(back), json);
}

TEST(BenchRunRecord, DecodeEnergyNullCarriesItsReason) {
  RunRecord r = examples::decoder_record();
  clear_energy(r, "no energy sensor: RAPL masked");
  auto json = to_json(r);
  for (const char* key : {"energy_j", "prefill_mj_per_token", "decode_energy_j", "decode_mj_per_token",
                          "decode_energy_window", "energy_window"})
    EXPECT_TRUE(json[key].is_null()) << key;
  EXPECT_EQ(json["energy_unavailable"], "no energy sensor: RAPL masked");
  EXPECT_EQ(json["decode_energy_unavailable"], "no energy sensor: RAPL masked");
  EXPECT_EQ(json["decode_tokens_per_s_mean"], 7'700.125) << "speed stands without energy";
  EXPECT_EQ(to_json(through_text(r)), json);

  r.decode_energy_unavailable.clear();
  EXPECT_EQ(to_json(r)["decode_energy_unavailable"], "not measured (no reason recorded)");
  // No decode phase (an encoder run): no reason either.
  RunRecord encoder = examples::energy_unavailable_record();
  encoder.decode_energy_unavailable = "stray";
  EXPECT_TRUE(to_json(encoder)["decode_energy_unavailable"].is_null());
  encoder.decode_energy_window = "not an object";
  EXPECT_THAT(error_of([&] { to_json(encoder); }), HasSubstr("decode_energy_window is a string"));
}

TEST(BenchRunRecord, TasksAreAnObjectOrNullWrittenAndRead) {
  RunRecord r = examples::decoder_record();
  r.tasks = {{"arc", {{"items", 4}, {"acc", 0.5}}}};
  EXPECT_EQ(to_json(through_text(r))["tasks"], r.tasks);
  r.tasks = "arc";
  EXPECT_THAT(error_of([&] { to_json(r); }),
              HasSubstr("run record '" + r.run_name + "': tasks is a string (\"arc\"), expected an object or null"));
  r.tasks = nullptr;
  auto json = to_json(r);
  json["tasks"] = nlohmann::json::array({1});
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }),
              HasSubstr("run record: tasks is an array, expected an object or null"));
}

// A version-1 line as qjoule wrote it before decoder runs: the first 47 keys, schema_version 1.
nlohmann::json as_version_1(const RunRecord& record) {
  auto json = to_json(record);
  for (std::size_t k = kRunRecordKeysV1; k < kRunRecordKeys.size(); ++k) json.erase(std::string(kRunRecordKeys[k]));
  json["schema_version"] = 1;
  return json;
}

TEST(BenchRunRecord, Version1RecordsStillRead) {
  for (const auto& record :
       {examples::full_record(), examples::energy_unavailable_record(), examples::failed_record()}) {
    const auto v1 = as_version_1(record);
    ASSERT_EQ(v1.size(), kRunRecordKeysV1);
    const RunRecord back = run_record_from_json(nlohmann::json::parse(v1.dump()));
    EXPECT_EQ(back.schema_version, kRunRecordSchemaVersion) << "read as the current version, nothing lost";
    EXPECT_FALSE(back.prefill_tokens);
    EXPECT_FALSE(back.decode_tokens);
    EXPECT_FALSE(back.decode_tokens_per_s_mean);
    EXPECT_TRUE(back.decode_energy_window.is_null());
    EXPECT_EQ(to_json(back), to_json(record)) << record.run_name;
    EXPECT_THAT(test::validate_json_schema(schema(), to_json(back)), IsEmpty());
  }
  // Version 1 has exactly its own keys: a phase key in a version-1 line is unknown there ...
  auto v1 = as_version_1(examples::full_record());
  v1["decode_tokens"] = 32;
  EXPECT_THAT(error_of([&] { run_record_from_json(v1); }), HasSubstr("unknown key 'decode_tokens'"));
  // ... and version 2 needs them all.
  auto v2 = to_json(examples::decoder_record());
  v2.erase("decode_tokens_per_s_std");
  EXPECT_THAT(error_of([&] { run_record_from_json(v2); }), HasSubstr("missing key 'decode_tokens_per_s_std'"));
}

// A decoder run scored on a text: every lm_* key round-trips and validates; without a text, its
// lm_unavailable says why; an encoder run has neither.
RunRecord text_record() {
  RunRecord r = examples::decoder_record();
  r.lm_text = "../shared/data/wikitext2/test.txt";
  r.lm_text_tokens = 4096;
  r.lm_ctx = 512;
  r.lm_stride = 256;
  r.lm_scored_tokens = 4095;
  r.lm_ppl = 7.25;
  r.lm_ppl_stderr = 0.125;
  r.lm_nll_mean = 1.98;
  r.lm_base_ppl = 7.0;
  r.lm_delta_ppl = 0.25;
  r.lm_kl_mean = 0.02;
  r.lm_kl_median = 0.01;
  r.lm_kl_p99 = 0.2;
  r.lm_kl_max = 0.9;
  r.lm_same_top_rate = 0.93;
  r.lm_rms_dp = 0.03;
  r.lm_kl_base = "out/kl-base/0123456789abcdef-01234567.qjkl";
  return r;
}

TEST(BenchRunRecord, TextQualityKeysRoundTripAndANullSaysWhy) {
  const auto json = to_json(text_record());
  EXPECT_EQ(json["lm_ppl"], 7.25);
  EXPECT_EQ(json["lm_scored_tokens"], 4095);
  EXPECT_TRUE(json["lm_unavailable"].is_null());
  EXPECT_EQ(to_json(run_record_from_json(nlohmann::json::parse(json.dump()))), json);
  EXPECT_THAT(test::validate_json_schema(schema(), json), IsEmpty());

  RunRecord no_text = examples::decoder_record();
  no_text.lm_unavailable = "no --text given";
  EXPECT_EQ(to_json(no_text)["lm_unavailable"], "no --text given");
  no_text.lm_unavailable.clear();
  EXPECT_EQ(to_json(no_text)["lm_unavailable"], "not measured (no reason recorded)") << "a null never without reason";
  EXPECT_TRUE(to_json(examples::full_record())["lm_unavailable"].is_null()) << "encoder run";
}

// A version-2 line (before --text): the first 60 keys; the lm_* keys read as null.
TEST(BenchRunRecord, Version2RecordsStillRead) {
  auto v2 = to_json(examples::decoder_record());
  for (std::size_t k = kRunRecordKeysV2; k < kRunRecordKeys.size(); ++k) v2.erase(std::string(kRunRecordKeys[k]));
  v2["schema_version"] = 2;
  const RunRecord back = run_record_from_json(nlohmann::json::parse(v2.dump()));
  EXPECT_EQ(back.schema_version, kRunRecordSchemaVersion);
  EXPECT_FALSE(back.lm_ppl);
  EXPECT_TRUE(back.decode_tokens_per_s_mean);
  auto with_lm = v2;
  with_lm["lm_ppl"] = 3.0;
  EXPECT_THAT(error_of([&] { run_record_from_json(with_lm); }), HasSubstr("unknown key 'lm_ppl'"));
}

TEST(BenchRunRecord, EnergyNullCarriesItsReason) {
  const auto json = to_json(examples::energy_unavailable_record());
  for (const char* key :
       {"energy_j", "energy_net_j", "energy_j_per_inference", "energy_mj_per_token", "energy_mean_power_w",
        "energy_peak_power_w", "energy_method", "energy_window", "accuracy", "accuracy_correct", "peak_rss_bytes"})
    EXPECT_TRUE(json[key].is_null()) << key;
  EXPECT_EQ(json["energy_unavailable"], "no energy sensor: RAPL masked in a container, no NVML, no meter given");

  RunRecord no_reason = examples::energy_unavailable_record();
  no_reason.energy_unavailable.clear();
  EXPECT_EQ(to_json(no_reason)["energy_unavailable"], "not measured (no reason recorded)");
}

TEST(BenchRunRecord, FailedRunsCarryTheirError) {
  const auto json = to_json(examples::failed_record());
  EXPECT_EQ(json["status"], "failed");
  EXPECT_EQ(json["error"], "layer 'classifier.weight': cols 2 is not a multiple of 64");
  EXPECT_TRUE(json["latency_p50_ms"].is_null());
  EXPECT_TRUE(json["sequences_per_s"].is_null());
}

TEST(BenchRunRecord, NonFiniteOptionalsBecomeNull) {
  RunRecord r = examples::full_record();
  r.fidelity_mean_kl = std::numeric_limits<double>::quiet_NaN();
  r.tokens_per_s = std::numeric_limits<double>::infinity();
  const auto json = to_json(r);
  EXPECT_TRUE(json["fidelity_mean_kl"].is_null());
  EXPECT_TRUE(json["tokens_per_s"].is_null());
  r.measured_seconds = std::nan("");
  EXPECT_THAT(error_of([&] { to_json(r); }), HasSubstr("measured_seconds is nan, expected a finite number"));
  r = examples::full_record();
  r.status = "skipped";
  EXPECT_THAT(error_of([&] { to_json(r); }), HasSubstr("status 'skipped', expected \"ok\" or \"failed\""));
}

TEST(BenchRunRecord, ReadingIsStrict) {
  auto json = to_json(examples::full_record());
  json["schema_version"] = 9;
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("schema_version 9, expected 1 to 8"));
  json["schema_version"] = 0;
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("schema_version 0, expected 1 to 8"));
  json["schema_version"] = "2";
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("schema_version \"2\", expected 1 to 8"));
  json.erase("schema_version");
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("missing key 'schema_version', expected 8"));

  json = to_json(examples::full_record());
  json.erase("latency_p90_ms");
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("missing key 'latency_p90_ms'"));
  json = to_json(examples::full_record());
  json["latency_p90"] = 1;
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("unknown key 'latency_p90'"));
  json = to_json(examples::full_record());
  json["batch"] = "8";
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }),
              HasSubstr("batch is a string (\"8\"), expected a positive integer"));
  json = to_json(examples::full_record());
  json["energy_j"] = "3.4";
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }),
              HasSubstr("energy_j is a string (\"3.4\"), expected a number"));
  json = to_json(examples::full_record());
  json["head_bytes"] = "131072000";
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("head_bytes is a string"));
  json = to_json(examples::full_record());
  json["head_format"] = 16;
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("head_format is"));
  json = to_json(examples::full_record());
  json["latency_p99_ms"] = nullptr;
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("1 of the 8 latency_* keys are null"));
  json = to_json(examples::full_record());
  json["status"] = "skipped";
  EXPECT_THAT(error_of([&] { run_record_from_json(json); }), HasSubstr("status \"skipped\""));
  EXPECT_THAT(error_of([] { run_record_from_json(nlohmann::json::array()); }),
              HasSubstr("run record is an array, expected an object"));
}

TEST(BenchRunRecord, Iso8601Utc) {
  using namespace std::chrono;
  const auto time = sys_days{year{2026} / November / 23} + hours{19} + minutes{45} + seconds{2} + milliseconds{900};
  EXPECT_EQ(iso8601_utc(time_point_cast<system_clock::duration>(time)), "2026-11-23T19:45:02Z");
}

TEST(BenchRecordSchema, SchemaListsExactlyTheRecordKeys) {
  const auto& s = schema();
  std::set<std::string> required, properties;
  for (const auto& key : s.at("required")) required.insert(key.get<std::string>());
  for (const auto& item : s.at("properties").items()) properties.insert(item.key());
  const std::set<std::string> keys(kRunRecordKeys.begin(), kRunRecordKeys.end());
  EXPECT_EQ(required, keys);
  EXPECT_EQ(properties, keys);
  EXPECT_EQ(s.at("additionalProperties"), false);
}

TEST(BenchRecordSchema, RecordsFromToJsonValidate) {
  RunRecord decoder_without_energy = examples::decoder_record();
  clear_energy(decoder_without_energy, "no energy sensor");
  for (const auto& record : {examples::full_record(), examples::energy_unavailable_record(), examples::failed_record(),
                             examples::decoder_record(), decoder_without_energy})
    EXPECT_THAT(test::validate_json_schema(schema(), to_json(record)), IsEmpty()) << record.run_name;
}

TEST(BenchRecordSchema, ExtraMissingOrMistypedKeysDoNotValidate) {
  auto json = to_json(examples::full_record());
  json["latency_p95_ms"] = 5.0;
  EXPECT_THAT(test::validate_json_schema(schema(), json),
              ::testing::Contains(HasSubstr("key 'latency_p95_ms' is not allowed")));

  json = to_json(examples::full_record());
  json.erase("energy_unavailable");
  EXPECT_THAT(test::validate_json_schema(schema(), json),
              ::testing::Contains(HasSubstr("missing required key 'energy_unavailable'")));

  json = to_json(examples::full_record());
  json["batch"] = "8";
  EXPECT_THAT(test::validate_json_schema(schema(), json),
              ::testing::Contains(HasSubstr("$.batch: expected type integer, found string")));
  json = to_json(examples::full_record());
  json["batch"] = 0;
  EXPECT_THAT(test::validate_json_schema(schema(), json), ::testing::Contains(HasSubstr("below the minimum 1")));
  json = to_json(examples::full_record());
  json["status"] = "skipped";
  EXPECT_THAT(test::validate_json_schema(schema(), json), ::testing::Contains(HasSubstr("is not one of")));
  json = to_json(examples::full_record());
  json["kernel_paths"] = {"ok", 3};
  EXPECT_THAT(test::validate_json_schema(schema(), json), ::testing::Contains(HasSubstr("$.kernel_paths[1]")));
}

TEST(BenchRecordSchema, TheValidatorRefusesKeywordsItDoesNotCheck) {
  const nlohmann::json with_pattern = {{"type", "string"}, {"pattern", "^a"}};
  EXPECT_THAT(test::validate_json_schema(with_pattern, "b"),
              ::testing::Contains(HasSubstr("uses 'pattern', which this validator does not support")));
}

TEST(BenchRecordSchema, SchemaDescribesTheCurrentVersion) {
  EXPECT_EQ(schema().at("properties").at("schema_version").at("enum"),
            nlohmann::json::array({kRunRecordSchemaVersion}));
  auto json = to_json(examples::decoder_record());
  json["decode_tokens"] = 0;
  EXPECT_THAT(test::validate_json_schema(schema(), json), ::testing::Contains(HasSubstr("below the minimum 1")));
  json = to_json(examples::decoder_record());
  json["decode_energy_window"] = "x";
  EXPECT_THAT(test::validate_json_schema(schema(), json),
              ::testing::Contains(HasSubstr("$.decode_energy_window: expected type")));
}

// The documents follow the field table (run_record_fields.h) column by column: the markdown's type
// and null columns, and the JSON Schema's types.
TEST(BenchRecordSchema, TheDocumentsFollowTheFieldTable) {
  const std::string doc = read_text(QJOULE_BENCH_RECORDS_DOC);
  const auto type_name = [](FieldType t, bool json_schema) -> std::string {
    switch (t) {
      case FieldType::integer: return "integer";
      case FieldType::number: return "number";
      case FieldType::string: return "string";
      case FieldType::boolean: return "boolean";
      case FieldType::strings: return json_schema ? "array" : "array of string";
      case FieldType::object: return "object";
    }
    return "?";
  };
  for (const RunRecordField& f : kRunRecordFields) {
    const std::string key(f.key);
    const std::string row = "| `" + key + "` | " + type_name(f.type, false) + (f.nullable ? " or null" : "") + " | " +
                            (f.nullable ? "yes" : "no") + " |";
    EXPECT_THAT(doc, HasSubstr(row)) << key << ": docs/bench-records.md disagrees with kRunRecordFields";
    const auto& type = schema()["properties"][key]["type"];
    std::set<std::string> types;
    if (type.is_string()) types.insert(type.get<std::string>());
    for (const auto& t : type.is_array() ? type : nlohmann::json::array()) types.insert(t.get<std::string>());
    std::set<std::string> expected = {type_name(f.type, true)};
    if (f.nullable) expected.insert("null");
    EXPECT_EQ(types, expected) << key << ": docs/bench-record.schema.json disagrees with kRunRecordFields";
  }
}

TEST(BenchRecordSchema, TheMarkdownDocumentsEveryKey) {
  const std::string doc = read_text(QJOULE_BENCH_RECORDS_DOC);
  for (auto key : kRunRecordKeys)
    EXPECT_THAT(doc, HasSubstr("| `" + std::string(key) + "` |")) << key << " is missing from docs/bench-records.md";
}

}  // namespace
}  // namespace qjoule::bench

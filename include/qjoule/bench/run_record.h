// The one flat record of one benchmark run: what ran, how long it took, the energy it used, how big
// the model was, how accurate it stayed. One JSON line per run in results.jsonl; the CSV and the
// paper table are projections of the same keys. Every key, type, unit and null is documented in
// docs/bench-records.md and checked by docs/bench-record.schema.json.
//
// Decoder language models are measured in two phases, each in its own energy window: prefill (the
// `seq` prompt tokens in one forward pass) and decode (greedy steps of one token over the KV cache).
// Their figures are the prefill_* / decode_* keys (null for encoder runs); the generic latency,
// throughput and energy keys of a decoder run describe its prefill phase.
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
#include "qjoule/bench/run_record_fields.h"

namespace qjoule::bench {

// 2 added the prefill_* / decode_* keys (decoder runs); 3 the lm_* keys (a decoder's perplexity and
// divergence from FP32 on a text, `bench --text`) and weights_source (pre-quantized checkpoints).
// 4 the roof_* / decode_roof_* keys (how close each phase came to the machine's measured limits).
// 5 the calibration_* keys (calibrated precisions: int4:...:gptq, int4:...:awq).
// Older records still read: the keys added since are absent and read as null, and the record reads
// back as the current version (nothing is lost: version 1 had no decoder runs, version 2 no text,
// version 3 no roofs, version 4 no calibrated precisions, version 5 no tasks, version 6 no head fields,
// version 7 no engine and no paired standard errors of ΔPPL and KL).
inline constexpr int kRunRecordSchemaVersion = 8;
inline constexpr int kOldestReadableRunRecordSchemaVersion = 1;

// Members are named as their JSON keys (run_record_fields.h), except the groups: `config` (model,
// device, precision, batch, seq, threads) and `latency` (latency_*).
struct RunRecord {
  int schema_version = kRunRecordSchemaVersion;
  std::string run_name;
  std::string start_time;  // ISO 8601 UTC, e.g. 2026-11-23T19:45:02Z (iso8601_utc)
  RunConfig config;
  std::string status = "ok";                              // "ok" or "failed"
  std::string error;                                      // one line, when failed
  nlohmann::json environment = nlohmann::json::object();  // cpu, cores, isa, os, compiler, qjoule version/commit
  std::vector<std::string> kernel_paths;                  // "int8 onednn:...:u8s8s32 x30"
  bool not_representative = false;                        // emulated formats: speed and energy not representative
  std::size_t warmup_iters = 0, iters = 0;
  std::optional<LatencyStats> latency;  // per batch
  double measured_seconds = 0;
  std::optional<double> sequences_per_s, tokens_per_s;
  // Energy: the measurement window as energy::to_json gives it (opaque here), plus derived figures.
  nlohmann::json energy_window;                  // null when no window
  std::optional<double> energy_j;                // total gross J over the measured iterations
  std::optional<double> energy_net_j;            // energy_j minus the idle baseline
  std::optional<double> energy_j_per_inference;  // per sequence, net when an idle baseline was measured else gross
  std::optional<double> energy_mj_per_token;
  std::optional<double> energy_mean_power_w, energy_peak_power_w;
  std::string energy_method;       // e.g. "counter rapl:package-0 (net of idle)", "estimated: cpu-tdp=65 x utilisation"
  std::string energy_unavailable;  // the reason, when energy_j is absent
  std::uint64_t model_bytes = 0, fp32_bytes = 0;  // as held in memory
  std::optional<std::uint64_t> peak_rss_bytes;
  std::optional<std::size_t> accuracy_correct, accuracy_labelled;  // task accuracy on a labelled dataset
  std::optional<double> accuracy;                                  // accuracy_correct / accuracy_labelled, 0..1
  // Fidelity to the FP32 run of the same model and shape.
  std::optional<double> fidelity_top1_agreement, fidelity_mean_kl, fidelity_max_abs_dlogit;
  std::size_t fidelity_examples = 0;
  std::vector<std::string> notes;

  // Decoder runs only (all absent for encoder runs). prefill_tokens and decode_tokens are set as soon
  // as a decoder run starts; the rest once its phase was measured.
  std::optional<std::size_t> prefill_tokens;                                  // N: prompt tokens per prefill (= seq)
  std::optional<double> prefill_tokens_per_s_mean, prefill_tokens_per_s_std;  // over timed prefills
  std::optional<double> prefill_mj_per_token;                                 // prefill window, per prompt token
  std::optional<std::size_t> decode_tokens;                                   // M: greedy steps per decode repetition
  std::optional<std::size_t> decode_iters;                                    // timed decode repetitions
  std::optional<double> decode_tokens_per_s_mean, decode_tokens_per_s_std;    // over timed repetitions
  std::optional<double> decode_ms_per_token_mean;                             // mean over repetitions of ms / M
  std::optional<double> decode_mj_per_token;                                  // decode window, per generated token
  std::optional<double> decode_energy_j;                                      // gross J of the decode window
  std::string decode_energy_unavailable;                                      // why decode_energy_j is absent
  nlohmann::json decode_energy_window;                                        // null when no decode window

  // A decoder run's quality on a text (`bench --text`, scored as `qjoule ppl` scores it), against the
  // FP32 reference's log-probabilities over the same tokens (eval/perplexity.h has the definitions).
  std::string lm_text;                                       // the text file ("" = none)
  std::optional<std::size_t> lm_text_tokens;                 // tokens scored over (after --max-tokens)
  std::optional<std::size_t> lm_ctx, lm_stride;              // the windows
  std::optional<std::size_t> lm_scored_tokens;               // tokens whose NLL counts
  std::optional<double> lm_ppl, lm_ppl_stderr, lm_nll_mean;  // this run's perplexity, its standard error, nats
  std::optional<double> lm_base_ppl, lm_delta_ppl;           // the FP32 reference's perplexity; lm_ppl − it
  std::optional<double> lm_delta_ppl_stderr;  // lm_delta_ppl's standard error, paired token by token with FP32's
  std::optional<double> lm_kl_mean, lm_kl_median, lm_kl_p99, lm_kl_max;  // KL(FP32 ‖ run) per token, nats
  std::optional<double> lm_kl_stderr;                                    // lm_kl_mean's standard error
  std::optional<double> lm_same_top_rate;                                // fraction of tokens with FP32's top token
  std::optional<double> lm_rms_dp;                                       // RMS change of the text token's probability
  std::string lm_kl_base;                                                // the FP32 reference file compared with
  std::string lm_unavailable;                                            // why a decoder run has no lm_ppl

  // Where the weights' codes came from when not from qjoule's own round-to-nearest: a pre-quantized
  // checkpoint's method and layout ("checkpoint: gptq 4-bit, group_size 128, ..."), or qjoule's
  // calibration ("calibrated: GPTQ on valid.txt: 64 sequences × 512 tokens, damp 0.01, ..."); "" = RTN.
  std::string weights_source;
  // Calibrated precisions (int4:...:gptq, int4:...:awq): the calibration tokens (sequences × tokens per
  // sequence), GPTQ's damping, and the seconds the calibration took (once per sweep and precision).
  std::optional<std::size_t> calibration_tokens;
  std::optional<double> calibration_damp, calibration_seconds;

  // A decoder run's multiple-choice task accuracy (`bench --task FILE`, scored as `qjoule score` scores
  // it: eval/task_scoring.h), by task name: {"file", "hash", "shape", "items", "acc", "acc_stderr",
  // "acc_norm", "acc_norm_stderr", "truncated", "tokens_per_s", "fp32_acc", "fp32_acc_norm", "delta_acc",
  // "delta_acc_norm", "changed_share", "reference_unavailable"} (bench/task_accuracy.h); null without --task.
  nlohmann::json tasks;

  // A decoder run's head (lm_head, or the tied embeddings as the head): its format as held ("bf16": the
  // checkpoint's 16-bit type, the default below FP32; "int8" where asked) and its bytes as held, which
  // model_bytes and the decode bytes a token count. Absent for encoder runs.
  std::string head_format;
  std::optional<std::size_t> head_bytes;

  // The engine whose kernels ran: "qjoule" for qjoule's own runs; a peer's name and version where a
  // caller of the Python package measured another engine under qjoule's meter ("torchao 0.18.0",
  // "openvino 2026.4.1"); "" (null) where the caller did not say, and in records before version 8.
  std::string engine;

  // The run against the machine's measured limits (environment.machine_limits; qjoule/limits/roofline.h):
  // the measured phase (an encoder's batches, a decoder's prefill) did roof_flops_per_token arithmetic and
  // moved roof_bytes_per_token per token, so achieved roof_gflops and roof_gb_per_s; its roof is the
  // lower of the compute peak of its GEMMs' type (attention's FP32 work at the FP32 peak beside GEMMs of
  // another type) and intensity × read bandwidth (roof_limit_gflops, which one: roof_bound); roof_fraction
  // = achieved / roof. A decoder's decode phase: bytes per generated token (the weights, one embedding
  // row, the KV cache read), its arithmetic, GB/s, its fraction of the read bandwidth.
  std::optional<double> roof_flops_per_token, roof_bytes_per_token, roof_gflops, roof_gb_per_s, roof_limit_gflops,
      roof_fraction;
  std::string roof_bound, roof_unavailable;  // roof_unavailable: why roof_fraction is absent
  std::optional<double> decode_roof_flops_per_token, decode_roof_bytes_per_token, decode_roof_gb_per_s,
      decode_roof_fraction;
  std::string decode_roof_bound;
};

// Makes the record's energy unavailable for `reason`: every energy figure and window cleared (the
// decode phase's too), energy_unavailable set, and decode_energy_unavailable too for a decoder run
// (the invariant to_json keeps: a reason exactly when there is no energy).
void clear_energy(RunRecord& record, std::string reason);

// Every key of a record's JSON, in the documented order (the CSV keeps this order), is kRunRecordKeys,
// from the field table in run_record_fields.h. Keys added after version 1 go at the end, so the
// columns of a version-1 CSV keep their places.
// The keys version 1 had: kRunRecordKeys up to and including "energy_window".
inline constexpr std::size_t kRunRecordKeysV1 = 47;
static_assert(kRunRecordKeys[kRunRecordKeysV1 - 1] == "energy_window");
// The keys version 2 had: up to and including "decode_energy_window".
inline constexpr std::size_t kRunRecordKeysV2 = 60;
static_assert(kRunRecordKeys[kRunRecordKeysV2 - 1] == "decode_energy_window");
// The keys version 3 had: up to and including "weights_source".
inline constexpr std::size_t kRunRecordKeysV3 = 79;
static_assert(kRunRecordKeys[kRunRecordKeysV3 - 1] == "weights_source");
// The keys version 4 had: up to and including "decode_roof_bound".
inline constexpr std::size_t kRunRecordKeysV4 = 92;
static_assert(kRunRecordKeys[kRunRecordKeysV4 - 1] == "decode_roof_bound");
// The keys version 5 had: up to and including "calibration_seconds".
inline constexpr std::size_t kRunRecordKeysV5 = 95;
static_assert(kRunRecordKeys[kRunRecordKeysV5 - 1] == "calibration_seconds");
// The keys version 6 had: up to and including "tasks".
inline constexpr std::size_t kRunRecordKeysV6 = 96;
static_assert(kRunRecordKeys[kRunRecordKeysV6 - 1] == "tasks");
// The keys version 7 had: up to and including "head_bytes".
inline constexpr std::size_t kRunRecordKeysV7 = 98;
static_assert(kRunRecordKeys[kRunRecordKeysV7 - 1] == "head_bytes");
static_assert(kRunRecordKeys.back() == "lm_kl_stderr", "the array's size must match its keys");

// One flat object with every key of kRunRecordKeys. Absent optionals are null; the energy figures
// also have a sibling reason, "energy_unavailable" (a string when energy_j is null, else null), and
// so does the decode phase: "decode_energy_unavailable" is a string when decode_tokens is set and
// decode_energy_j is null, else null; and so does a decoder run's text quality: "lm_unavailable" is
// a string when decode_tokens is set and lm_ppl is null, else null; and so does the roof:
// "roof_unavailable" is a string when roof_fraction is null, else null.
// `error` is null unless status is "failed"; `energy_method` is null when empty. A non-finite
// optional number is written as null (JSON has no NaN). A status other than "ok"/"failed", a
// non-finite measured_seconds or an energy_window (or decode_energy_window) that is neither an
// object nor null fails.
nlohmann::json to_json(const RunRecord& record);

// Reads what to_json wrote (round-trips). Also reads version-1, -2 and -3 records (which lack the keys
// added since: they read as null) and returns them as version kRunRecordSchemaVersion. Any other
// schema_version, a missing or unknown key (for that version), or a wrong type fails with a line
// naming the key, what was found and what was expected.
RunRecord run_record_from_json(const nlohmann::json& json);

// "2026-11-23T19:45:02Z": ISO 8601, UTC, whole seconds.
std::string iso8601_utc(std::chrono::system_clock::time_point time);

// A record's environment.host_capacity read back: the line saying what a busy host delivered around the
// run, "" where it was quiet (or the record predates the probes, or ran on a GPU); and its share.
std::string busy_host(const RunRecord& r);
std::optional<double> host_delivered_fraction(const RunRecord& r);
// A decoder's decode over the memory read measured beside it (host_capacity.decode_roof_fraction_beside).
std::optional<double> decode_roof_fraction_beside(const RunRecord& r);

}  // namespace qjoule::bench

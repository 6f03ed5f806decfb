// Hand-made run records shared by the bench tests: a full one, one without energy, a failed one, a
// decoder run with both phases, and a small builder for paper-table cases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "qjoule/bench/run_record.h"

namespace qjoule::bench::examples {

inline RunRecord full_record() {
  RunRecord r;
  r.config.model = "distilbert-base";
  r.config.precision = "int8";
  r.config.batch = 8;
  r.config.threads = 2;
  r.run_name = run_name(r.config);
  r.start_time = "2026-11-23T19:45:02Z";
  r.environment = {{"cpu", "AMD EPYC 7B13"}, {"cores", 2}, {"isa", "avx2"}, {"qjoule_version", "0.1.0"}};
  r.kernel_paths = {"int8 onednn:gemm:u8s8s32 x30", "fp32 layernorm x13"};
  r.warmup_iters = 5;
  r.iters = 20;
  r.latency = LatencyStats{20, 4.25, 0.5, 3.5, 4.0, 5.0, 6.0, 6.5};
  r.measured_seconds = 0.085;
  r.sequences_per_s = 1882.35;
  r.tokens_per_s = 1882.35 * 128;
  r.energy_window = {{"name", "int8"}, {"duration_s", 0.085}, {"sensors", nlohmann::json::array()}};
  r.energy_j = 3.4;
  r.energy_net_j = 2.1;
  r.energy_j_per_inference = 2.1 / 160;
  r.energy_mj_per_token = 2.1 / 160 / 128 * 1000;
  r.energy_mean_power_w = 40.0;
  r.energy_peak_power_w = 55.5;
  r.energy_method = "counter rapl:package-0 (net of idle)";
  r.model_bytes = 68'000'000;
  r.fp32_bytes = 267'000'000;
  r.peak_rss_bytes = 512'000'000;
  r.accuracy_correct = 794;
  r.accuracy_labelled = 872;
  r.accuracy = 794.0 / 872.0;
  r.fidelity_top1_agreement = 0.985;
  r.fidelity_mean_kl = 0.0031;
  r.fidelity_max_abs_dlogit = 0.42;
  r.fidelity_examples = 872;
  r.notes = {"oneDNN u8s8s32, per-tensor dynamic activation scales"};
  return r;
}

inline RunRecord energy_unavailable_record() {
  RunRecord r = full_record();
  clear_energy(r, "no energy sensor: RAPL masked in a container, no NVML, no meter given");
  r.accuracy_correct.reset();
  r.accuracy_labelled.reset();
  r.accuracy.reset();
  r.peak_rss_bytes.reset();
  return r;
}

inline RunRecord failed_record() {
  RunRecord r;
  r.config.precision = "nf4:dq";
  r.run_name = run_name(r.config);
  r.start_time = "2026-11-23T19:50:00Z";
  r.status = "failed";
  r.error = "layer 'classifier.weight': cols 2 is not a multiple of 64";
  r.energy_unavailable = "run failed before measuring";
  return r;
}

// A decoder run (tiny-llama, int8, 64 prompt tokens, 32 decode tokens) with both phases measured.
inline RunRecord decoder_record() {
  RunRecord r;
  r.config.model = "tests/fixtures/decoders/tiny-llama";
  r.config.precision = "int8";
  r.config.batch = 1;
  r.config.seq = 64;
  r.config.threads = 2;
  r.run_name = run_name(r.config);
  r.start_time = "2026-11-23T20:10:00Z";
  r.environment = {{"cpu", "AMD EPYC 7B13"}, {"cores", 2}};
  r.kernel_paths = {"int8 onednn:brg:avx2:u8s8s32 x14", "fp32 onednn:brg:avx2:f32 x1"};
  r.warmup_iters = 2;
  r.iters = 40;
  r.latency = LatencyStats{40, 0.5, 0.05, 0.4, 0.5, 0.55, 0.6, 0.7};
  r.measured_seconds = 0.02;
  r.sequences_per_s = 2000.0;
  r.tokens_per_s = 2000.0 * 64;
  r.energy_window = {{"name", "prefill"}, {"duration_s", 0.02}, {"sensors", nlohmann::json::array()}};
  r.energy_j = 0.8;
  r.energy_net_j = 0.5;
  r.energy_j_per_inference = 0.5 / 40;
  r.energy_mj_per_token = 0.5 / 40 / 64 * 1000;
  r.energy_mean_power_w = 40.0;
  r.energy_method = "measured: rapl:package-0 (per inference: net of idle)";
  r.model_bytes = 946'688;
  r.fp32_bytes = 1'806'848;
  r.peak_rss_bytes = 17'000'000;
  r.fidelity_top1_agreement = 0.875;
  r.fidelity_mean_kl = 0.004;
  r.fidelity_max_abs_dlogit = 0.4;
  r.fidelity_examples = 8;
  r.notes = {"decoder: per prefill"};
  r.prefill_tokens = 64;
  r.prefill_tokens_per_s_mean = 128'500.25;
  r.prefill_tokens_per_s_std = 3'100.5;
  r.prefill_mj_per_token = r.energy_mj_per_token;
  r.decode_tokens = 32;
  r.decode_iters = 25;
  r.decode_tokens_per_s_mean = 7'700.125;
  r.decode_tokens_per_s_std = 165.5;
  r.decode_ms_per_token_mean = 0.13;
  r.decode_energy_j = 4.2;
  r.decode_mj_per_token = 2.6 * 1e3 / (25 * 32);
  r.decode_energy_window = {{"name", "decode"}, {"duration_s", 0.104}, {"sensors", nlohmann::json::array()}};
  return r;
}

// A successful run of distilbert-base on cpu, seq 128, threads 1, the given batch.
inline RunRecord table_record(const std::string& precision, double p50_ms, std::optional<double> j_per_inference,
                              std::optional<double> accuracy, std::uint64_t model_bytes, std::size_t batch = 1) {
  RunRecord r;
  r.config.precision = precision;
  r.config.batch = batch;
  r.run_name = run_name(r.config);
  r.start_time = "2026-11-23T19:45:02Z";
  r.latency = LatencyStats{10, p50_ms, 0.1, p50_ms, p50_ms, p50_ms, p50_ms, p50_ms};
  r.sequences_per_s = 1000.0 * static_cast<double>(batch) / p50_ms;
  r.energy_j_per_inference = j_per_inference;
  r.energy_j = j_per_inference ? std::optional<double>(*j_per_inference * 100) : std::nullopt;
  if (!j_per_inference) r.energy_unavailable = "no energy sensor";
  r.energy_method = j_per_inference ? "counter rapl:package-0" : "";
  r.accuracy = accuracy;
  r.model_bytes = model_bytes;
  r.fp32_bytes = 256ull << 20;
  return r;
}

}  // namespace qjoule::bench::examples

// The report tests' sample benchmark: distilbert-base on 2 CPU threads, seq 128, six precisions at
// batch 1 and 8, plus an emulated run and a failed one; energy measured for most runs, estimated for
// one, unavailable for one, and one window flagged short. tests/fixtures/report holds it as written
// by make_report_sample (results.jsonl and a power trace for one run); a test checks they agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "qjoule/bench/run_record.h"
#include "qjoule/limits/roofline.h"

namespace qjoule::test::report_sample {

inline constexpr double kPackagePowerW = 38.0;  // while the model runs
inline constexpr double kIdlePowerW = 12.0;
inline constexpr std::size_t kLabelled = 872;  // SST-2 dev

inline nlohmann::json environment() {
  return {{"cpu", "AMD EPYC 7B13"},
          {"logical_cpus", 2},
          {"isa", {"avx", "avx2", "fma", "f16c", "hypervisor"}},
          {"os", "Linux 6.1.0-27-amd64 x86_64"},
          {"compiler", "GNU 12.2.0"},
          {"build_type", "Release"},
          {"qjoule_version", "0.1.0"},
          {"qjoule_commit", "3390ad5d1e2f"},
          {"onednn", "2.6.3"}};
}

// The machine's limits as qjoule limits measures them (environment.machine_limits of each record).
inline limits::MachineLimits machine_limits() {
  limits::MachineLimits l;
  l.threads = 2;
  l.read_gb_per_s = 40.0;
  l.triad_gb_per_s = 31.5;
  l.fp32_gflops = 420.0;
  l.int8_gops = 840.0;
  l.unavailable["bf16_gflops"] = "this CPU has no AVX512_BF16 (BF16 products run as FP32 there)";
  l.method = "measured (sample)";
  l.machine = "cpu=AMD EPYC 7B13; microcode=0xa0011d1; memory=8123456 kB; kernel=6.1.0-27-amd64 x86_64";
  l.measured_at = "2026-11-23T18:58:00Z";
  l.measure_seconds = 3.1;
  return l;
}

// The measured phase's roof figures, as the runner records them.
inline void add_roof(bench::RunRecord& r, double flops_per_token, double bytes_per_token, double tokens_per_s,
                     limits::ComputeType compute) {
  const auto l = machine_limits();
  r.environment["machine_limits"] = limits::to_json(l);
  r.environment["machine_limits"]["source"] =
      "read from ~/.cache/qjoule/limits-t2.json (measured 2026-11-23T18:58:00Z)";
  r.roof_flops_per_token = flops_per_token;
  r.roof_bytes_per_token = bytes_per_token;
  std::string why;
  const auto p = limits::roof_point({flops_per_token, bytes_per_token, compute}, tokens_per_s, l, why);
  r.roof_gflops = p->achieved_gflops;
  r.roof_gb_per_s = p->achieved_gb_per_s;
  r.roof_limit_gflops = p->roof_gflops;
  r.roof_fraction = p->fraction;
  r.roof_bound = p->bound;
}

// A measured energy window as the energy module writes it (the keys the report reads, trimmed).
inline nlohmann::json energy_window(const std::string& name, double duration_s, double energy_j, bool short_window) {
  const double idle_j = kIdlePowerW * duration_s;
  nlohmann::json flags = short_window ? nlohmann::json{"short_window"} : nlohmann::json::array();
  return {{"name", name},
          {"duration_s", duration_s},
          {"status", "measured"},
          {"idle_subtracted", true},
          {"sensors",
           {{{"id", "rapl:package-0"},
             {"scope", "cpu_package"},
             {"counts_in_total", true},
             {"energy_j", energy_j},
             {"energy_source", "counter"},
             {"net_energy_j", energy_j - idle_j},
             {"idle_power_w", kIdlePowerW},
             {"samples", static_cast<int>(duration_s * 100)},
             {"coverage", 1.0},
             {"update_period_s", short_window ? 0.5 : 0.001},
             {"valid", !short_window},
             {"flags", flags}}}},
          {"total",
           {{"energy_j", energy_j},
            {"net_energy_j", energy_j - idle_j},
            {"sensors", {"rapl:package-0"}},
            {"valid", !short_window},
            {"unavailable", nullptr}}},
          {"unavailable_sensors", nlohmann::json::array()}};
}

struct Format {
  std::string precision, kernel;
  double p50_bs1_ms;
  std::size_t correct;
  double agreement;
  std::uint64_t bytes;
};

inline std::vector<Format> formats() {
  return {{"fp32", "fp32 onednn:gemm:jit:f32", 48.0, 794, 1.0, 267'800'000},
          {"bf16", "bf16 qjoule:avx2:bf16_f32", 61.0, 793, 0.998, 178'000'000},
          {"int8", "int8 onednn:brg:avx2:u8s8s32", 22.0, 786, 0.985, 130'900'000},
          {"w8", "w8 qjoule:avx2:w8_f32", 41.0, 794, 0.999, 130'900'000},
          {"int4", "int4 qjoule:avx2:int4_g128_sym_f32", 35.0, 780, 0.972, 105'000'000},
          {"nf4", "nf4 qjoule:avx2:nf4_f32", 39.0, 787, 0.981, 106'500'000}};
}

inline bench::RunRecord measured_record(const Format& f, std::size_t batch, int minute) {
  bench::RunRecord r;
  r.config.model = "distilbert-base";
  r.config.precision = f.precision;
  r.config.batch = batch;
  r.config.seq = 128;
  r.config.threads = 2;
  r.run_name = bench::run_name(r.config);
  r.start_time = fmt::format("2026-11-23T19:{:02}:02Z", minute);
  r.environment = environment();
  r.kernel_paths = {f.kernel + " x36", "fp32 layernorm x13"};
  r.warmup_iters = 3;
  const double p50 = batch == 1 ? f.p50_bs1_ms : f.p50_bs1_ms * 6.8;
  r.iters = static_cast<std::size_t>(std::ceil(1000.0 / p50));
  r.latency = bench::LatencyStats{r.iters, p50 * 1.02, p50 * 0.03, p50 * 0.95, p50, p50 * 1.08, p50 * 1.2, p50 * 1.3};
  r.measured_seconds = static_cast<double>(r.iters) * p50 * 1.02 / 1000.0;
  const double sequences = static_cast<double>(r.iters * batch);
  r.sequences_per_s = sequences / r.measured_seconds;
  r.tokens_per_s = *r.sequences_per_s * 128;
  const double energy = kPackagePowerW * r.measured_seconds;
  r.energy_window = energy_window(f.precision, r.measured_seconds, energy, false);
  r.energy_j = energy;
  r.energy_net_j = energy - kIdlePowerW * r.measured_seconds;
  r.energy_j_per_inference = *r.energy_net_j / sequences;
  r.energy_mj_per_token = *r.energy_j_per_inference / 128 * 1000;
  r.energy_mean_power_w = kPackagePowerW;
  r.energy_peak_power_w = kPackagePowerW * 1.15;
  r.energy_method = "measured: rapl:package-0 (per inference: net of idle)";
  r.model_bytes = f.bytes;
  r.fp32_bytes = 267'800'000;
  r.peak_rss_bytes = f.bytes + 180'000'000;
  r.accuracy_correct = f.correct;
  r.accuracy_labelled = kLabelled;
  r.accuracy = static_cast<double>(f.correct) / static_cast<double>(kLabelled);
  r.fidelity_top1_agreement = f.agreement;
  r.fidelity_mean_kl = (1.0 - f.agreement) * 0.2;
  r.fidelity_max_abs_dlogit = (1.0 - f.agreement) * 30 + 0.001;
  r.fidelity_examples = kLabelled;
  // DistilBERT-base: 42.5 M multiply-adds in the Linears and the attention over 128 tokens per token.
  add_roof(r, 87.4e6, static_cast<double>(f.bytes) / static_cast<double>(batch * 128), *r.tokens_per_s,
           f.precision == "int8" ? limits::ComputeType::int8 : limits::ComputeType::fp32);
  return r;
}

inline std::string int8_bs1_run() { return "distilbert-base_cpu_int8_w8a8_s128_bs1_t2"; }

inline std::vector<bench::RunRecord> records() {
  std::vector<bench::RunRecord> out;
  int minute = 0;
  for (const std::size_t batch : {std::size_t{1}, std::size_t{8}})
    for (const auto& f : formats()) out.push_back(measured_record(f, batch, minute++));

  for (auto& r : out) {
    if (r.config.precision == "int4" && r.config.batch == 1) {  // a window too short for its counter
      r.energy_window = energy_window("int4", r.measured_seconds, *r.energy_j, true);
      r.energy_method += "; flagged, see energy_window";
    }
    if (r.config.precision == "bf16" && r.config.batch == 8) {  // energy estimated, not measured
      r.energy_window["sensors"] = nlohmann::json::array();
      r.energy_window["total"] = {{"energy_j", nullptr}, {"valid", true}, {"unavailable", "no sensor counts"}};
      r.energy_net_j.reset();
      r.energy_j = 65.0 * 0.97 * r.measured_seconds;
      r.energy_j_per_inference = *r.energy_j / static_cast<double>(r.iters * r.config.batch);
      r.energy_mj_per_token = *r.energy_j_per_inference / 128 * 1000;
      r.energy_mean_power_w = 65.0 * 0.97;
      r.energy_peak_power_w.reset();
      r.energy_method = "estimated: cpu-tdp=65 W x utilisation 0.97";
      r.notes.push_back("energy is an estimate (asked for with --energy-estimate), not a measurement");
    }
    if (r.config.precision == "w8" && r.config.batch == 8) {  // no sensor for this run
      bench::clear_energy(r,
                          "no energy sensor: rapl: /sys/class/powercap/intel-rapl:0/energy_uj is not readable "
                          "(Permission denied); nvml: libnvidia-ml.so.1 not found");
    }
  }

  auto emulated = measured_record({"int4:emulate", "int4 emulated:fake-quant", 95.0, 781, 0.973, 267'800'000}, 1, 12);
  emulated.not_representative = true;
  emulated.notes.push_back("emulated (fake-quantized) layers: speed and energy are not representative of the format");
  out.push_back(emulated);

  bench::RunRecord failed;
  failed.config.model = "distilbert-base";
  failed.config.precision = "nf4:dq";
  failed.config.threads = 2;
  failed.run_name = bench::run_name(failed.config);
  failed.start_time = "2026-11-23T19:13:02Z";
  failed.environment = environment();
  failed.roof_unavailable = "the run failed (see error)";
  failed.status = "failed";
  failed.error = "layer 'classifier.weight': cols 2 is not a multiple of 64";
  failed.energy_unavailable = "run failed before measuring";
  out.push_back(failed);
  return out;
}

// A decoder sweep scored on a text (`bench --text`): tinyllama-shaped, seq 128, fp32 / int8 / int4 /
// nf4 / nf4:dq, decode energy measured for three and unavailable (a long reason) for two; nf4:dq's
// perplexity 6.5% over FP32's (flagged at the default 5%).
inline std::vector<bench::RunRecord> decoder_records() {
  struct Lm {
    std::string precision;
    std::uint64_t bytes;
    double decode_tok_s, ppl, kl, same_top;
    bool energy;
  };
  const std::vector<Lm> formats = {{"fp32", 4'400'000'000, 10.6, 7.7700, 0.000002, 1.0, true},
                                   {"int8", 1'150'000'000, 33.8, 7.7912, 0.0031, 0.981, true},
                                   {"int4", 640'000'000, 55.4, 8.0811, 0.0412, 0.932, true},
                                   {"nf4", 690'000'000, 55.5, 8.0420, 0.0366, 0.938, false},
                                   {"nf4:dq", 660'000'000, 54.9, 8.2750, 0.0521, 0.921, false}};
  const std::string reason =
      "no sensor that counts in the total had a value; rapl: /sys/class/powercap does not exist: running in a "
      "virtual machine (the CPU reports the `hypervisor` flag), and hypervisors do not pass RAPL through";
  std::vector<bench::RunRecord> out;
  int minute = 20;
  for (const auto& f : formats) {
    bench::RunRecord r;
    r.config.model = "tinyllama-shapes";
    r.config.precision = f.precision;
    r.config.batch = 1;
    r.config.seq = 128;
    r.config.threads = 2;
    r.run_name = bench::run_name(r.config);
    r.start_time = fmt::format("2026-11-23T19:{:02}:02Z", minute++);
    r.environment = environment();
    r.kernel_paths = {f.precision + " x154"};
    r.warmup_iters = 2;
    const double prefill_tok_s = f.decode_tok_s * 14;
    const double p50 = 128.0 / prefill_tok_s * 1000.0;
    r.iters = 5;
    r.latency = bench::LatencyStats{5, p50 * 1.02, p50 * 0.03, p50 * 0.95, p50, p50 * 1.08, p50 * 1.2, p50 * 1.3};
    r.measured_seconds = 5 * p50 / 1000.0;
    r.sequences_per_s = 5 / r.measured_seconds;
    r.tokens_per_s = *r.sequences_per_s * 128;
    r.prefill_tokens = 128;
    r.prefill_tokens_per_s_mean = prefill_tok_s;
    r.prefill_tokens_per_s_std = prefill_tok_s * 0.02;
    r.decode_tokens = 32;
    r.decode_iters = 4;
    r.decode_tokens_per_s_mean = f.decode_tok_s;
    r.decode_tokens_per_s_std = f.decode_tok_s * 0.03;
    r.decode_ms_per_token_mean = 1000.0 / f.decode_tok_s;
    if (f.energy) {
      r.energy_window =
          energy_window(f.precision + ":prefill", r.measured_seconds, kPackagePowerW * r.measured_seconds, false);
      r.energy_j = kPackagePowerW * r.measured_seconds;
      r.energy_net_j = (kPackagePowerW - kIdlePowerW) * r.measured_seconds;
      r.energy_j_per_inference = *r.energy_net_j / 5;
      r.energy_mj_per_token = *r.energy_j_per_inference / 128 * 1000;
      r.prefill_mj_per_token = r.energy_mj_per_token;
      r.energy_mean_power_w = kPackagePowerW;
      r.energy_method = "measured: rapl:package-0 (per inference: net of idle)";
      const double decode_s = 4 * 32 / f.decode_tok_s;
      r.decode_energy_window = energy_window(f.precision + ":decode", decode_s, kPackagePowerW * decode_s, false);
      r.decode_energy_j = kPackagePowerW * decode_s;
      r.decode_mj_per_token = (kPackagePowerW - kIdlePowerW) * decode_s * 1000 / (4 * 32);
    } else {
      bench::clear_energy(r, reason);
    }
    r.model_bytes = f.bytes;
    r.fp32_bytes = 4'400'000'000;
    r.peak_rss_bytes = f.bytes + 300'000'000;
    r.lm_text = "../shared/data/wikitext2/test.txt";
    r.lm_text_tokens = 4096;
    r.lm_ctx = 512;
    r.lm_stride = 256;
    r.lm_scored_tokens = 4095;
    r.lm_ppl = f.ppl;
    r.lm_ppl_stderr = f.ppl * 0.012;
    r.lm_nll_mean = std::log(f.ppl);
    r.lm_base_ppl = 7.7700;
    r.lm_delta_ppl = f.ppl - 7.7700;
    r.lm_delta_ppl_stderr = 0.02 + (f.ppl - 7.7700) * 0.1;  // paired: far below lm_ppl_stderr
    r.lm_kl_mean = f.kl;
    r.lm_kl_stderr = f.kl * 0.05;
    r.lm_kl_median = f.kl * 0.6;
    r.lm_kl_p99 = f.kl * 9;
    r.lm_kl_max = f.kl * 30;
    r.lm_same_top_rate = f.same_top;
    r.lm_rms_dp = f.kl * 0.8;
    r.lm_kl_base = "out/kl-base/5d2f0c1e9a8b7c6d-1a2b3c4d.qjkl";
    // TinyLlama's shapes: about 1 G multiply-adds per token; decode reads every weight per token.
    add_roof(r, 2.0e9, static_cast<double>(f.bytes) / 128.0, *r.tokens_per_s,
             f.precision == "int8" ? limits::ComputeType::int8 : limits::ComputeType::fp32);
    r.decode_roof_flops_per_token = 2.0e9;
    r.decode_roof_bytes_per_token = static_cast<double>(f.bytes) + 6.0e6;
    r.decode_roof_gb_per_s = *r.decode_roof_bytes_per_token * f.decode_tok_s / 1e9;
    r.decode_roof_fraction = *r.decode_roof_gb_per_s / 40.0;
    r.decode_roof_bound = "memory: read 40.0 GB/s";
    out.push_back(std::move(r));
  }
  return out;
}

inline std::string results_jsonl() {
  std::string text;
  for (const auto& r : records()) text += bench::to_json(r).dump() + "\n";
  return text;
}

// traces/<int8_bs1_run()>.csv: 0.5 s at 10 ms; the package counter has energy only (its power is
// derived), the wall meter has power only.
inline std::string int8_bs1_trace_csv() {
  std::string text = "time_s,sensor,energy_j,power_w\n";
  for (int i = 0; i <= 50; ++i) {
    const double t = i * 0.01;
    const double watts = kPackagePowerW + 4.0 * std::sin(t * 40.0) + (i < 5 ? -20.0 : 0.0);
    text += fmt::format("{:.6f},rapl:package-0,{:.6f},\n", t, kPackagePowerW * t);
    text += fmt::format("{:.6f},meter:wall,,{:.3f}\n", t, watts + 20.0);
  }
  return text;
}

}  // namespace qjoule::test::report_sample

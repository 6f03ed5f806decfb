#include "qjoule/bench/decoder_callable_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "bench/window_energy.h"
#include "qjoule/bench/bench_runner.h"
#include "qjoule/bench/latency_stats.h"
#include "qjoule/error.h"

namespace qjoule::bench {
namespace {

bool is_quality_key(const std::string& key) {
  return std::any_of(std::begin(kCallerQualityKeys), std::end(kCallerQualityKeys),
                     [&](const char* k) { return key == k; });
}

void fill_quality(RunRecord& r, const nlohmann::json& q) {
  const auto number = [&](const char* key) -> std::optional<double> {
    return q.contains(key) ? std::optional<double>(q[key].get<double>()) : std::nullopt;
  };
  const auto count = [&](const char* key) -> std::optional<std::size_t> {
    return q.contains(key) ? std::optional<std::size_t>(q[key].get<std::size_t>()) : std::nullopt;
  };
  if (q.contains("lm_text")) r.lm_text = q["lm_text"].get<std::string>();
  r.lm_ctx = count("lm_ctx");
  r.lm_stride = count("lm_stride");
  r.lm_scored_tokens = count("lm_scored_tokens");
  r.lm_ppl = number("lm_ppl");
  r.lm_ppl_stderr = number("lm_ppl_stderr");
  r.lm_base_ppl = number("lm_base_ppl");
  r.lm_delta_ppl = number("lm_delta_ppl");
  r.lm_delta_ppl_stderr = number("lm_delta_ppl_stderr");
  r.lm_kl_mean = number("lm_kl_mean");
  r.lm_kl_stderr = number("lm_kl_stderr");
  r.lm_same_top_rate = number("lm_same_top_rate");
  if (r.lm_ppl) r.lm_nll_mean = std::log(*r.lm_ppl);
  if (!q.empty())
    r.notes.push_back(fmt::format("lm_*: supplied by the caller ({}), not scored by qjoule",
                                  r.engine.empty() ? std::string("engine not given") : r.engine));
  else
    r.lm_unavailable = "the caller supplied no quality figures";
  if (!q.empty() && !r.lm_ppl) r.lm_unavailable = "the caller supplied no perplexity";
}

}  // namespace

void check_decoder_callable_run(const DecoderCallableRun& d) {
  check_callable_run(d.run);
  if (d.run.batch != 1) fail("batch {} is not supported for a decoder, expected 1 sequence", d.run.batch);
  if (d.decode_tokens == 0) fail("decode_tokens is 0, expected at least 1 generated token a decode call");
  if (d.run.engine.empty()) fail("engine is empty: say which engine ran and its version ('torchao 0.18.0')");
  if (!d.quality.is_object()) fail("quality is {}, expected a dict of lm_* figures", d.quality.dump());
  for (const auto& [key, value] : d.quality.items()) {
    if (!is_quality_key(key))
      fail(
          "quality key '{}' is not one qjoule records, expected any of lm_text, lm_ctx, lm_stride, lm_scored_tokens, "
          "lm_ppl, lm_ppl_stderr, lm_base_ppl, lm_delta_ppl, lm_delta_ppl_stderr, lm_kl_mean, lm_kl_stderr, "
          "lm_same_top_rate",
          key);
    const bool text = key == "lm_text", count = key == "lm_ctx" || key == "lm_stride" || key == "lm_scored_tokens";
    const bool ok = text ? value.is_string()
                    : count
                        ? value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0)
                        : value.is_number() && std::isfinite(value.get<double>());
    if (!ok)
      fail("quality {} is {}, expected {}", key, value.dump(),
           text    ? "a string"
           : count ? "a whole number >= 0"
                   : "a finite number");
  }
}

DecoderCallableTiming time_decoder_callable(const std::function<void()>& prefill, const std::function<void()>& decode,
                                            const DecoderCallableRun& d, energy::EnergyMeter& meter) {
  DecoderCallableTiming t;
  CallableRun phase = d.run;
  phase.name = d.run.name + ":prefill";
  t.prefill = time_callable(prefill, phase, meter);
  phase.name = d.run.name + ":decode";
  t.decode = time_callable(decode, phase, meter);
  return t;
}

RunRecord decoder_callable_run_record(const DecoderCallableRun& d, const DecoderCallableTiming& timing) {
  check_decoder_callable_run(d);
  // The generic keys as a decoder record has them: one "batch" = one prefill of seq tokens.
  RunRecord r = callable_run_record(d.run, timing.prefill);
  const std::size_t n = d.run.seq, m = d.decode_tokens;
  r.prefill_tokens = n;
  const auto [prefill_mean, prefill_sd] = mean_and_sd(rates(timing.prefill.samples_ms, n));
  r.prefill_tokens_per_s_mean = prefill_mean;
  r.prefill_tokens_per_s_std = prefill_sd;
  r.prefill_mj_per_token = r.energy_mj_per_token;
  r.decode_tokens = m;
  r.decode_iters = timing.decode.samples_ms.size();
  const auto [decode_mean, decode_sd] = mean_and_sd(rates(timing.decode.samples_ms, m));
  r.decode_tokens_per_s_mean = decode_mean;
  r.decode_tokens_per_s_std = decode_sd;
  r.decode_ms_per_token_mean = mean_and_sd(timing.decode.samples_ms).first / double(m);
  // Each phase's high-water mark from its warm-up on: the run's is the higher (decode adds the cache).
  if (timing.prefill.peak_rss_bytes && timing.decode.peak_rss_bytes)
    r.peak_rss_bytes = std::max(*timing.prefill.peak_rss_bytes, *timing.decode.peak_rss_bytes);
  r.decode_energy_window = energy::to_json(timing.decode.window);
  detail::WindowEnergy de;
  if (const auto gpu = cuda_index(d.run.device)) {
    const std::string id = fmt::format("nvml:gpu{}", *gpu);
    de = detail::window_energy(
        timing.decode.window,
        detail::total_over(
            timing.decode.window, [&](const energy::SensorEnergy& e) { return e.sensor_id == id; }, "no " + id),
        false);
  } else {
    de = detail::window_energy(timing.decode.window);
  }
  r.decode_energy_j = de.energy_j;
  r.decode_energy_unavailable = de.energy_j ? "" : (de.unavailable.empty() ? "not measured" : de.unavailable);
  if (de.basis_j)
    r.decode_mj_per_token = *de.basis_j * 1e3 / (static_cast<double>(timing.decode.samples_ms.size()) * double(m));
  fill_quality(r, d.quality);
  for (const auto& note : d.notes) r.notes.push_back("caller: " + note);
  r.notes.push_back(fmt::format(
      "decoder (caller's): latency, throughput and energy_* are per prefill of {} prompt tokens; decode_* per call "
      "of the caller's decode, which generates {} tokens",
      n, m));
  return r;
}

RunRecord failed_callable_run_record(const CallableRun& run, const std::string& error, std::size_t decode_tokens) {
  check_callable_run(run);
  RunRecord r = callable_record_identity(run, std::chrono::system_clock::now());
  r.status = "failed";
  r.error = error.empty() ? std::string("failed (no reason given)") : error;
  r.roof_unavailable = "the run failed (see error)";
  if (decode_tokens > 0) {
    r.prefill_tokens = r.config.seq;
    r.decode_tokens = decode_tokens;
    r.lm_unavailable = "the run failed (see error)";
  }
  clear_energy(r, "the run failed (see error)");
  return r;
}

}  // namespace qjoule::bench

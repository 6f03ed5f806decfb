// A caller's decoder (another engine: transformers, TorchAO, OpenVINO, llama.cpp) timed the way `qjoule
// bench` times a decoder, in two phases with an energy window each, and recorded in the same flat record:
// the Python package's `qjoule.bench_decoder(prefill, decode, ...)` runs the peers of scripts/peers/ so
// their rows sit beside qjoule's own in one results folder, one report and one paper table.
//
//   DecoderCallableRun d;  d.run.name = "torchao-int4";  d.run.seq = 128;  d.decode_tokens = 64;
//   check_decoder_callable_run(d);
//   DecoderCallableTiming t = time_decoder_callable(prefill, decode, d, meter);
//   RunRecord r = decoder_callable_run_record(d, t);
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/callable_bench.h"

namespace qjoule::bench {

struct DecoderCallableRun {
  CallableRun run;                 // run.seq: prompt tokens a prefill; run.batch: 1; run.engine: who ran it
  std::size_t decode_tokens = 0;   // M: tokens one call of `decode` generates
  std::vector<std::string> notes;  // the caller's, recorded as given ("decode: generate(M) minus a prefill")
  // The caller's quality figures on a text, recorded as given and labelled so: an object of any of
  // kCallerQualityKeys (lm_text a string, the counts whole numbers, the rest finite numbers).
  nlohmann::json quality = nlohmann::json::object();
};

// The record keys a caller may supply its own figures for.
inline constexpr const char* kCallerQualityKeys[] = {
    "lm_text",     "lm_ctx",       "lm_stride",           "lm_scored_tokens", "lm_ppl",       "lm_ppl_stderr",
    "lm_base_ppl", "lm_delta_ppl", "lm_delta_ppl_stderr", "lm_kl_mean",       "lm_kl_stderr", "lm_same_top_rate"};

// check_callable_run's lines, and: batch other than 1, decode_tokens 0, no engine, a quality key not
// in kCallerQualityKeys or of the wrong type (one line naming it).
void check_decoder_callable_run(const DecoderCallableRun& d);

struct DecoderCallableTiming {
  CallableTiming prefill, decode;  // windows "<name>:prefill" and "<name>:decode"
};

// The prefill phase, then the decode phase, each as time_callable times a function (warm-up, then at
// least min_time and min_iters calls in its own window).
DecoderCallableTiming time_decoder_callable(const std::function<void()>& prefill, const std::function<void()>& decode,
                                            const DecoderCallableRun& d, energy::EnergyMeter& meter);

// The decoder record: the generic keys from the prefill phase (as `qjoule bench`'s decoder records),
// prefill_* and decode_* tokens/s with their spread, both windows' energy per token, the caller's
// quality figures and notes, engine.
RunRecord decoder_callable_run_record(const DecoderCallableRun& d, const DecoderCallableTiming& timing);

// A run that could not be had (a peer that failed to install or to run): status failed, `error` its one
// line, the environment, nothing measured.
RunRecord failed_callable_run_record(const CallableRun& run, const std::string& error, std::size_t decode_tokens);

}  // namespace qjoule::bench

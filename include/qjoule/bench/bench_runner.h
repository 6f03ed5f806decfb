// Runs one benchmark configuration end to end and returns its flat record: builds the model in the
// configuration's format, times batches (warm-up excluded) inside an energy window, measures peak
// memory, and scores accuracy on a labelled dataset and fidelity to the FP32 run of the same model
// and sequence length. A run that fails (a format that does not fit the model's shapes, say) comes
// back as a record with status "failed" and the error's one line; the sweep goes on.
//
// --device cuda[:N] (encoder classifiers only) builds the whole model on GPU N
// (model::EncoderClassifierCuda): each timed batch is bracketed by CUDA events on the model's stream
// (input copy in, forward, logits copy out) and those event times are the latency samples; the energy
// window synchronizes GPU N at both ends (a meter synchronize hook) and the run's energy is GPU N's
// NVML sensor (BenchOptions::gpu_energy_sensors), the other sensors staying in energy_window. A CPU run
// never counts a GPU sensor. Accuracy and fidelity run on the GPU model too; the FP32 reference is the
// CPU's.
//
// A decoder language model (a folder whose config.json is a Llama, Qwen2 or GPT-2 causal LM) runs the
// decoder path instead: batch 1, `seq` = N prompt tokens, M = BenchOptions::decode_tokens. Two phases,
// each timed and measured in its own energy window:
//   prefill: {clear the KV cache; one forward pass over the N prompt tokens, logits of the last only},
//            warm-up passes, then timed passes (iters / min_time_s / min_iters as for encoders);
//   decode:  one prefill outside the window, warm-up repetitions, then timed repetitions of
//            {truncate the cache back to the N prompt tokens; M greedy steps of one token each}.
// The record's latency, throughput and energy keys describe the prefill phase (one "batch" = one
// prefill of N tokens); the prefill_* / decode_* keys hold each phase's tokens/s (mean and standard
// deviation over repetitions) and energy per token. With BenchOptions::lm.text the run then scores the
// text as `qjoule ppl` does, against the FP32 reference (lm_quality.h): the lm_* keys. Without it,
// fidelity compares the last-token logits with the FP32 model's on a few pseudo-random prompts of N
// tokens and lm_unavailable says why there is no perplexity; accuracy is null either way.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/calibration_settings.h"
#include "qjoule/bench/lm_quality.h"
#include "qjoule/bench/task_accuracy.h"
#include "qjoule/bench/run_config.h"
#include "qjoule/bench/run_record.h"
#include "qjoule/energy/energy_meter.h"

namespace qjoule::bench {

// The model name that stands for the embedded DistilBERT-base-shaped classifier with random weights.
inline constexpr const char* kSyntheticModelName = "distilbert-base";

// Tokens generated per decode repetition of a decoder model, unless asked otherwise.
inline constexpr std::size_t kDefaultDecodeTokens = 32;

// Prompts (of `seq` tokens) on which a decoder run's last-token logits are compared with FP32's:
// min(fidelity_examples, this), each one FP32 and one quantized prefill.
inline constexpr std::size_t kDecoderFidelityPrompts = 8;

struct BenchOptions {
  std::string dataset;  // labelled dataset for accuracy ("" = fidelity on synthetic inputs only)
  std::string text_column, label_column;
  std::size_t warmup = 2;                            // batches run before timing
  std::optional<std::size_t> iters;                  // timed batches; unset = as many as fit min_time_s
  double min_time_s = 2.0;                           // at least this long, and at least 10 energy-counter updates
  double cooldown_s = 0.0;                           // sleep after each run
  std::size_t fidelity_examples = 32;                // synthetic sequences compared with FP32 when there is no dataset
  std::size_t min_iters = 3;                         // never fewer timed batches than this (percentiles need samples)
  std::size_t decode_tokens = kDefaultDecodeTokens;  // decoder models: greedy steps per decode repetition
  // Decoder models: the decode phase timed in this many back-to-back energy windows, each at least min_time_s
  // (and 10 counter updates) or its share of iters; the record's decode energy is their whole, a note gives
  // each window's mJ/token and their spread.
  std::size_t decode_energy_windows = 3;
  // Where each run's power trace goes (<trace_dir>/<run name>.csv, see qjoule/energy/trace_csv.h);
  // empty = no traces. The meter must keep a trace (MeterOptions::trace_capacity > 0).
  std::filesystem::path trace_dir;
  // --device cuda[:N] runs: CUDA device index N -> the id of the meter's NVML sensor for that GPU
  // ("nvml:gpuK"; `qjoule bench` matches them by PCI address). A GPU run's energy is that sensor's alone;
  // a GPU without an entry (or whose sensor is absent) has its energy unavailable, with the reason.
  std::map<int, std::string> gpu_energy_sensors;
  std::map<int, std::string> gpu_energy_absent;  // CUDA device index -> why it has no sensor
  // Decoder models: the text each run scores (`--text`), and the sweep's folder, whose kl-base/ keeps
  // the FP32 references (lm_quality.h).
  LmTextOptions lm;
  // Decoder models: the multiple-choice tasks each run scores (`--task`; task_accuracy.h keeps their FP32
  // answers in the sweep's task-base/).
  TaskOptions tasks;
  // Decoder models in a calibrated precision: the text they calibrate on, once per precision (results_dir's
  // calibrated/ keeps the result, bench/calibration_cache.h).
  CalibrationSettings calibration;
  std::filesystem::path results_dir = ".";
};

// Whether `model` is a decoder language model: a folder whose config.json names a supported causal
// LM (model::model_family). The embedded model and folders without config.json are not.
bool is_decoder_model(const std::string& model);

// Checks every configuration before anything runs: known device and precision (with its options),
// and a sequence length the model has positions for; for a decoder model also batch 1, no
// SmoothQuant, decode_tokens >= 1 and seq + decode_tokens within max_position_embeddings. A cuda
// device must be usable (else the one-line reason from cuda_device_status()), its model an encoder
// classifier, its precision one with a CUDA kernel and without SmoothQuant. Fails with one line
// naming the configuration.
void validate_configs(const std::vector<RunConfig>& configs, std::size_t decode_tokens = kDefaultDecodeTokens);

// --reference DIR (LmTextOptions::reference): an unquantized model whose shapes match every pre-quantized
// checkpoint of the sweep, at least one of which there must be; one line otherwise. Nothing when empty.
void validate_reference(const std::vector<RunConfig>& configs, const std::string& reference);

// The machine and build the records come from (CPU model, cores, ISA flags, OS, compiler, qjoule
// version and commit, oneDNN), the same for every run of one invocation.
nlohmann::json run_environment();

class BenchRunner {
 public:
  BenchRunner(BenchOptions options, energy::EnergyMeter& meter);
  ~BenchRunner();
  BenchRunner(const BenchRunner&) = delete;
  BenchRunner& operator=(const BenchRunner&) = delete;

  RunRecord run(const RunConfig& config);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qjoule::bench

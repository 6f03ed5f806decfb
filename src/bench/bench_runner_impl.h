// The inside of BenchRunner: what every run shares (bench_runner_common.cpp: the public class, timing
// repetitions, energy windows, the machine's limits, peak memory, the record's common fields and a
// failed run's record) and what varies with the kind of model, one file each: bench_runner_encoder.cpp
// (classifiers) and bench_runner_decoder.cpp (decoders, their FP32 reference and text quality).
#pragma once

#include "qjoule/bench/bench_runner.h"
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <cmath>
#include <functional>
#include <numeric>
#include <thread>
#include <fmt/format.h>
#include "bench/bench_inputs.h"
#include "bench/energy_windows.h"
#include "bench/peak_rss.h"
#include "bench/record_roofline.h"
#include "bench/roofline_work.h"
#include "bench/window_energy.h"
#include "qjoule/bench/calibration_cache.h"
#include "qjoule/bench/latency_stats.h"
#include "qjoule/bench/memory_prediction.h"
#include "qjoule/dataset.h"
#include "qjoule/error.h"
#include "qjoule/eval/classifier_eval.h"
#include "qjoule/eval/fidelity.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/energy/trace_csv.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/calibrated_linear_factory.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/device_backend.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/unused_tensors.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/model/synthetic/synthetic_encoder.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"

namespace qjoule::bench {
namespace runner_detail {

using Clock = std::chrono::steady_clock;
using detail::decoder_prompt_ids;
using detail::is_synthetic;
using detail::timing_token_ids;
using detail::total_over;
using detail::window_energy;
using detail::window_per_token;
using detail::WindowEnergy;
using detail::WindowPerToken;
using detail::windows_note;

inline std::string kernel_line(const std::string& path, int count) { return fmt::format("{} x{}", path, count); }

inline int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// A deliberately slowed kernel, for tests of the roofline's warning only: QJOULE_TEST_SLOW_FORWARD_MS=X
// sleeps X ms inside every timed forward (encoder batch, prefill, decode step).
inline void test_slowdown() {
  static const double ms = [] {
    const char* v = std::getenv("QJOULE_TEST_SLOW_FORWARD_MS");
    return v != nullptr ? std::atof(v) : 0.0;
  }();
  if (ms > 0.0) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(ms * 1000.0)));
}

}  // namespace runner_detail

using namespace runner_detail;  // NOLINT: the runner's own helpers, in its two files

struct BenchRunner::Impl {
  BenchOptions options;
  energy::EnergyMeter& meter;
  nlohmann::json environment = run_environment();

  // The model whose parameters are loaded (one at a time: each copy of DistilBERT-base is 265 MB).
  std::string loaded_model;
  std::optional<model::EncoderParams> params;
  std::string unused_tensors;  // of the loaded encoder's checkpoint: a note in each of its records
  std::optional<tokenize::WordPieceTokenizer> tokenizer;
  std::optional<eval::Dataset> dataset;
  // FP32 logits of the fidelity inputs, by "model|seq".
  std::map<std::string, std::vector<std::vector<float>>> fp32_logits;

  // The text decoder runs score, and their FP32 references; the same for their multiple-choice tasks.
  LmQuality lm;
  TaskAccuracy tasks;
  // Calibrated precisions' weights, once per (model, precision): the sweep's folder keeps them.
  CalibrationCache calibration;

  // The machine's limits per thread count (the per-machine cache, else measured once: a few seconds).
  std::map<int, limits::CachedLimits> machine_limits;
  const limits::CachedLimits& limits_for(int threads);
  // The roofs of a run: the CPU's with its threads, or GPU N's (device copy, cuBLASLt per type). Where
  // they cannot be had, nullptr with roof_unavailable saying why.
  std::map<int, limits::CachedLimits> gpu_limits;
  const limits::CachedLimits& gpu_limits_for(int gpu_index);
  // Measured (where not cached) before a run starts, never inside it: the bandwidth buffers (a GB and
  // more) would count in the run's peak memory. A failure here is said by run_limits, in the record.
  void prefetch_limits(const RunConfig& c);
  const limits::MachineLimits* run_limits(RunRecord& r, int gpu_index);

  Impl(BenchOptions o, energy::EnergyMeter& m)
      : options(std::move(o)),
        meter(m),
        lm(options.lm, options.results_dir,
           // On a line of its own: the console reporter's "[k/n] run ..." is waiting for its result.
           [](const std::string& line) { fmt::print(stderr, "\n{}", line); }),
        tasks(options.tasks, options.results_dir, [](const std::string& line) { fmt::print(stderr, "\n{}", line); }),
        calibration(options.calibration, options.results_dir,
                    [](const std::string& line) { fmt::print(stderr, "\n{}", line); }) {}

  // Encoder models (bench_runner_encoder.cpp): the loaded model's parameters, tokenizer and dataset; the
  // model in a run's format on the CPU or on GPU `device`; the fidelity inputs' logits (the dataset,
  // truncated to seq tokens, with its evaluation result; or synthetic sequences) and their FP32 reference
  // (of the loaded model, or of --reference's for a pre-quantized checkpoint, read for this and dropped).
  void load(const std::string& model_name);
  // A calibrated precision's weights (read from the sweep's folder, or calibrated once for the sweep) and
  // the record's calibration fields; nullptr for other precisions.
  std::shared_ptr<model::CalibratedInt4> calibrated_weights(const RunConfig& c, RunRecord& r);
  model::EncoderClassifier build(const RunConfig& c, std::shared_ptr<model::CalibratedInt4> calibrated);
  model::EncoderClassifier build_cuda(const RunConfig& c, int device,
                                      std::shared_ptr<model::CalibratedInt4> calibrated);
  std::vector<std::vector<float>> run_fidelity_inputs(const model::EncoderClassifier& m, const RunConfig& c,
                                                      std::size_t limit = 0,
                                                      std::optional<eval::ClassifierEvalResult>* result = nullptr);
  std::vector<std::vector<float>> run_fidelity_inputs(const model::EncoderConfig& cfg,
                                                      const eval::ClassifierForward& forward, const RunConfig& c,
                                                      std::size_t limit = 0,
                                                      std::optional<eval::ClassifierEvalResult>* result = nullptr);
  const std::vector<std::vector<float>>& reference_logits(const RunConfig& c, const std::string& fp32_model);

  // At least min_time_s and at least 10 update periods of the slowest energy counter.
  double min_seconds() const;

  void fill_energy(RunRecord& r, const energy::Measurement& m, const energy::EnergyTotal& total, bool allow_estimate,
                   double sequences, double tokens) {
    detail::fill_record_energy(r, m, total, allow_estimate, sequences, tokens);
  }

  // The energy of GPU `gpu_index`'s board alone in window `m`; `reason` says why there is none.
  energy::EnergyTotal gpu_total(const energy::Measurement& m, int gpu_index, std::string& reason) const;

  // A GPU run's energy is its GPU's NVML sensor alone; a CPU run never counts a GPU board (a sweep that
  // mixes devices has NVML sensors on). Without GPU sensors in the window, a CPU run keeps the meter's
  // own total, as it always has.
  void fill_device_energy(RunRecord& r, const energy::Measurement& m, int gpu_index, double sequences, double tokens);

  // Runs `body` options.iters times, or else until at least min_s seconds and min_iters repetitions
  // have passed; returns each repetition's milliseconds and sets `seconds` to the loop's wall time.
  std::vector<double> time_repetitions(const std::function<void()>& body, double min_s, double& seconds) const {
    return time_self_timed_repetitions(
        [&body]() -> std::optional<double> {
          body();
          return std::nullopt;
        },
        min_s, seconds);
  }

  // The same where `body` may time itself (CUDA events): its milliseconds are the sample when it
  // returns them, the host's wall clock around it otherwise.
  std::vector<double> time_self_timed_repetitions(const std::function<std::optional<double>()>& body, double min_s,
                                                  double& seconds) const {
    return time_self_timed_repetitions(body, min_s, seconds, options.iters, options.min_iters);
  }
  // The same for `count` repetitions when given, else until min_s seconds and min_reps repetitions.
  std::vector<double> time_self_timed_repetitions(const std::function<std::optional<double>()>& body, double min_s,
                                                  double& seconds, std::optional<std::size_t> count,
                                                  std::size_t min_reps) const;

  // A decoder run's decode phase: its repetitions in options.decode_energy_windows back-to-back energy windows
  // named `name`#1, #2, ... (each at least min_s and one repetition, or its share of options.iters), opened
  // inside the phase's own window.
  struct WindowedRepetitions {
    std::vector<double> samples_ms;
    std::vector<energy::Measurement> windows;
    std::vector<std::size_t> repetitions;  // of each window
  };
  WindowedRepetitions time_in_energy_windows(const std::function<std::optional<double>()>& body, double min_s,
                                             const std::string& name);

  // The run's peak RSS since the reset (or why there is none), and the prediction beside it.
  static void record_peak_rss(RunRecord& r, bool rss_reset, const MemoryPrediction& predicted);

  void record_kernels(RunRecord& r, const std::map<std::string, int>& counts);

  RunRecord run(const RunConfig& c);

  // A synchronize hook on the meter for as long as the GPU model it calls lives.
  class HookGuard {
   public:
    HookGuard(energy::EnergyMeter& meter, std::string label, std::function<void()> hook)
        : meter_(meter), label_(std::move(label)) {
      meter_.add_synchronize_hook(label_, std::move(hook));
    }
    ~HookGuard() { meter_.remove_synchronize_hook(label_); }
    HookGuard(const HookGuard&) = delete;
    HookGuard& operator=(const HookGuard&) = delete;

   private:
    energy::EnergyMeter& meter_;
    std::string label_;
  };

  // One encoder run (a decoder's goes to run_decoder): the model on its device, timing in the energy
  // window, memory, accuracy and fidelity (bench_runner_encoder.cpp).
  void run_measured(const RunConfig& c, RunRecord& r);

  // Decoder models (bench_runner_decoder.cpp).
  std::vector<std::vector<float>> decoder_fidelity_logits(const model::DecoderLM& m, std::size_t n) const;
  // FP32 last-token logits of the fidelity prompts, of `fp32_model` (the run's, or --reference's).
  const std::vector<std::vector<float>>& decoder_reference_logits(const RunConfig& c, const std::string& fp32_model);
  void run_decoder(const RunConfig& c, RunRecord& r);
};

}  // namespace qjoule::bench

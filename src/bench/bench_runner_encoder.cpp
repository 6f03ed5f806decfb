// BenchRunner's encoder runs: the classifier built on its device, timed in the run's energy window, its
// memory, accuracy and fidelity to FP32 (its unquantized model's, for a pre-quantized checkpoint).
#include "bench/bench_runner_impl.h"
#include "kernels/cpu/weight_only/panel_matmul.h"

namespace qjoule::bench {

void BenchRunner::Impl::run_measured(const RunConfig& c, RunRecord& r) {
  kernels::set_num_threads(c.threads);
  const bool on_gpu = kernels::is_cuda_device(c.device);
  if (is_decoder_model(c.model)) return run_decoder(c, r);
  // What validate_configs checks, before anything loads: the GPU (one line why not), a known device.
  const int gpu_index = on_gpu ? kernels::require_cuda_device(c.device) : -1;
  if (!on_gpu && c.device != "cpu") kernels::require_cuda_device(c.device);  // names what was wrong
  load(c.model);
  // A pre-quantized checkpoint has no FP32 weights to compare with: its unquantized model's
  // (--reference), else fidelity is not measured (accuracy is).
  const auto& quantization = params->config.quantization;
  const std::string& fp32_model = quantization ? options.lm.reference : c.model;
  const std::vector<std::vector<float>> no_reference;
  const auto& reference = fp32_model.empty() ? no_reference : reference_logits(c, fp32_model);
  if (quantization) {
    r.weights_source = "checkpoint: " + quantization->describe();
    r.notes.push_back(fp32_model.empty()
                          ? "fidelity to FP32 not measured: a pre-quantized checkpoint holds no FP32 weights "
                            "(--reference DIR, its unquantized model, gives the FP32 run it is compared with)"
                          : fmt::format("fidelity compares with the FP32 run of --reference {}", fp32_model));
  }
  // Calibrated weights first (read from the sweep's folder, or calibrated once for the sweep): not part of
  // the run's memory or time.
  auto calibrated = calibrated_weights(c, r);
  kernels::avx512::release_panel_scratch();  // the previous run's weight-only panels
  const bool rss_reset = reset_peak_rss();
  // The prediction `bench --dry-run` prints, from this process's memory now (the FP32 parameters included).
  MemoryPrediction predicted = predict_peak_memory(c, 0, current_rss_bytes().value_or(0));
  predicted.held_bytes = 0;
  if (on_gpu) predicted.unavailable = "the model is in GPU memory; the prediction is of host memory";
  // The model on its device: the one EncoderClassifier graph on the CPU, or on GPU N with every weight there.
  const model::EncoderClassifier m =
      on_gpu ? build_cuda(c, gpu_index, std::move(calibrated)) : build(c, std::move(calibrated));
  return_freed_memory();  // the build's freed FP32 copies (its peak is already in the high-water mark)
  const model::EncoderConfig& cfg = m.config();
  r.model_bytes = m.bytes_held();
  r.fp32_bytes = m.fp32_bytes();
  record_kernels(r, m.kernel_path_counts());
  const eval::ClassifierForward forward_fn = [&m](const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                                  float* logits) { m.forward(ids, mask, batch, seq, logits); };
  std::optional<HookGuard> hook;
  if (on_gpu) {
    hook.emplace(meter, fmt::format("cuda:{} cudaDeviceSynchronize", gpu_index), [&m] { m.synchronize(); });
    r.notes.push_back(
        fmt::format("device: {}; every weight on the GPU ({} bytes of parameters); non-GEMM "
                    "operations {}",
                    m.device_name(), r.model_bytes, m.nongemm_path()));
    r.notes.push_back(
        fmt::format("latency: CUDA events on GPU {} around each batch (ids and mask copied in, "
                    "forward, logits copied out); the energy window synchronizes GPU {} at both ends",
                    gpu_index, gpu_index));
  }

  // Timing.
  const auto ids = timing_token_ids(c.model, cfg.vocab_size, c.batch, c.seq);
  const std::vector<int32_t> mask(ids.size(), 1);
  std::vector<float> logits(c.batch * static_cast<std::size_t>(cfg.num_labels));
  const auto batch = [&]() -> std::optional<double> {
    if (on_gpu) return m.forward_timed(ids.data(), mask.data(), int64_t(c.batch), int64_t(c.seq), logits.data());
    m.forward(ids.data(), mask.data(), int64_t(c.batch), int64_t(c.seq), logits.data());
    test_slowdown();
    return std::nullopt;
  };
  for (std::size_t i = 0; i < options.warmup; ++i) batch();
  const double min_s = min_seconds();
  const bool tracing = !options.trace_dir.empty() && !meter.sensors().empty();
  if (tracing) meter.drain_trace([](const energy::TraceSample&) {});  // readings from before this run
  std::optional<limits::HostCapacityProbe> host;                      // outside the energy window
  if (!on_gpu) host.emplace(static_cast<int>(c.threads));
  energy::Window window = meter.begin_window(r.run_name);
  const auto start = Clock::now();
  double loop_seconds = 0;
  const std::vector<double> samples_ms = time_self_timed_repetitions(batch, min_s, loop_seconds);
  const energy::Measurement em = meter.end_window(window);
  const auto host_measured = host ? std::optional(host->finish()) : std::nullopt;
  if (tracing) {
    std::filesystem::create_directories(options.trace_dir);
    energy::TraceCsvWriter trace(options.trace_dir / (r.run_name + ".csv"), meter);
    trace.drain(meter, em.start_ns);
    trace.close();
  }
  r.measured_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.iters = samples_ms.size();
  r.latency = summarize_latency(samples_ms);
  const double sequences = double(r.iters) * double(c.batch);
  r.sequences_per_s = sequences / r.measured_seconds;
  r.tokens_per_s = sequences * double(c.seq) / r.measured_seconds;
  fill_device_energy(r, em, gpu_index, sequences, sequences * double(c.seq));
  if (const limits::MachineLimits* roofs = run_limits(r, gpu_index)) {
    record_roofline(r, *roofs, encoder_phase_work(m, int64_t(c.batch), int64_t(c.seq)), *r.tokens_per_s);
    if (host_measured) record_host_capacity(r, *host_measured, *roofs);
  }
  record_peak_rss(r, rss_reset, predicted);
  if (on_gpu) r.notes.push_back("peak_rss_bytes is host memory; the model's GPU memory is model_bytes (+ activations)");

  // Accuracy and fidelity.
  std::optional<eval::ClassifierEvalResult> result;
  const auto run_logits = run_fidelity_inputs(cfg, forward_fn, c, 0, &result);
  if (!reference.empty()) {
    const auto f = eval::compare_logits(reference, run_logits);
    r.fidelity_top1_agreement = f.top1_agreement;
    r.fidelity_mean_kl = f.mean_kl;
    r.fidelity_max_abs_dlogit = f.max_abs_dlogit;
    r.fidelity_examples = f.examples;
  }
  if (result && result->labelled > 0) {
    r.accuracy_correct = result->correct;
    r.accuracy_labelled = result->labelled;
    r.accuracy = result->accuracy();
    if (result->truncated > 0)
      r.notes.push_back(fmt::format("{} of {} dataset examples were truncated to {} tokens", result->truncated,
                                    result->total, c.seq));
  }
  if (is_synthetic(c.model))
    r.notes.push_back("embedded DistilBERT-base-shaped model with random weights: accuracy is fidelity to FP32 only");
  if (!unused_tensors.empty()) r.notes.push_back(unused_tensors);
}

void BenchRunner::Impl::load(const std::string& model_name) {
  if (loaded_model == model_name && params) return;
  params.reset();
  tokenizer.reset();
  unused_tensors.clear();
  if (is_synthetic(model_name)) {
    params = model::synthetic_encoder_params(model::distilbert_base_spec());
  } else {
    const auto checkpoint = io::Checkpoint::open(model_name);
    params = model::load_encoder_params(checkpoint, model::load_encoder_config(model_name, checkpoint));
    unused_tensors = model::unused_tensors_warning(checkpoint);
  }
  if (!options.dataset.empty()) {
    if (!dataset) {
      eval::DatasetOptions d;
      d.text_column = options.text_column;
      d.label_column = options.label_column;
      dataset = eval::load_dataset(options.dataset, d);
    }
    eval::check_labels(*dataset, static_cast<int>(params->config.num_labels));
    if (!dataset->pretokenized) {
      if (is_synthetic(model_name))
        fail(
            "--dataset {} holds text, and the embedded model '{}' has no tokenizer; give --model DIR, or a "
            "pre-tokenized dataset",
            options.dataset, model_name);
      tokenizer = tokenize::WordPieceTokenizer::from_model_dir(model_name);
    }
  }
  loaded_model = model_name;
}

std::shared_ptr<model::CalibratedInt4> BenchRunner::Impl::calibrated_weights(const RunConfig& c, RunRecord& r) {
  if (!quant::needs_calibration(c.precision.spec_or_fail())) return nullptr;
  auto calibrated = calibration.get(c.model, c.precision);
  r.weights_source = "calibrated: " + calibration_summary(*calibrated, options.calibration.file);
  r.calibration_tokens = calibrated->tokens;
  if (calibrated->method.find("GPTQ") != std::string::npos) r.calibration_damp = calibrated->damp;
  r.calibration_seconds = calibrated->seconds;
  return calibrated;
}

model::EncoderClassifier BenchRunner::Impl::build(const RunConfig& c,
                                                  std::shared_ptr<model::CalibratedInt4> calibrated) {
  const auto policy = quant::LayerPolicy::uniform(c.precision);
  const auto& spec = policy.precision_spec();
  model::SmoothingFactors smoothing;
  if (spec.smoothquant_alpha) {
    smoothing = model::calibrate_smoothquant(*params, *spec.smoothquant_alpha, [&](const model::EncoderClassifier& m) {
      run_fidelity_inputs(m, c, /*limit=*/16);
    });
  }
  auto linears = model::device_backend(-1, policy, smoothing).linears;
  if (calibrated) linears = model::calibrated_linear_factory(std::move(linears), std::move(calibrated));
  return model::EncoderClassifier(*params, linears);
}

model::EncoderClassifier BenchRunner::Impl::build_cuda(const RunConfig& c, int device,
                                                       std::shared_ptr<model::CalibratedInt4> calibrated) {
  auto backend = model::device_backend(device, quant::LayerPolicy::uniform(c.precision));
  auto linears = calibrated ? model::calibrated_linear_factory(std::move(backend.linears), std::move(calibrated),
                                                               std::move(backend.int4_codes))
                            : std::move(backend.linears);
  return model::EncoderClassifier(*params, linears, model::ActivationDtype::f32, backend.ops);
}

std::vector<std::vector<float>> BenchRunner::Impl::run_fidelity_inputs(
    const model::EncoderClassifier& m, const RunConfig& c, std::size_t limit,
    std::optional<eval::ClassifierEvalResult>* result) {
  return run_fidelity_inputs(
      m.config(),
      [&m](const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) {
        m.forward(ids, mask, batch, seq, logits);
      },
      c, limit, result);
}

// Logits of the fidelity inputs: the dataset (truncated to seq tokens) or synthetic sequences.
// With a dataset the full evaluation result is returned too.
std::vector<std::vector<float>> BenchRunner::Impl::run_fidelity_inputs(
    const model::EncoderConfig& cfg, const eval::ClassifierForward& forward, const RunConfig& c, std::size_t limit,
    std::optional<eval::ClassifierEvalResult>* result) {
  if (dataset) {
    eval::Dataset subset;
    const eval::Dataset* set = &*dataset;
    if (limit > 0 && limit < dataset->examples.size()) {
      subset = eval::Dataset{dataset->path, {}, dataset->pretokenized, dataset->labeled};
      subset.examples.assign(dataset->examples.begin(), dataset->examples.begin() + static_cast<long>(limit));
      set = &subset;
    }
    auto r = eval::evaluate_classifier(cfg, forward, tokenizer ? &*tokenizer : nullptr, *set, {c.batch, c.seq});
    auto logits = r.logits;
    if (result != nullptr) *result = std::move(r);
    return logits;
  }
  const std::size_t count = limit > 0 ? std::min(limit, options.fidelity_examples) : options.fidelity_examples;
  const auto ids = timing_token_ids(c.model, cfg.vocab_size, count, c.seq);
  const std::vector<int32_t> mask(ids.size(), 1);
  const auto labels = static_cast<std::size_t>(cfg.num_labels);
  std::vector<std::vector<float>> out;
  std::vector<float> logits;
  for (std::size_t start = 0; start < count; start += c.batch) {
    const std::size_t n = std::min(c.batch, count - start);
    logits.assign(n * labels, 0.0f);
    forward(ids.data() + start * c.seq, mask.data() + start * c.seq, int64_t(n), int64_t(c.seq), logits.data());
    for (std::size_t i = 0; i < n; ++i)
      out.emplace_back(logits.begin() + long(i * labels), logits.begin() + long((i + 1) * labels));
  }
  return out;
}

// FP32 logits of the fidelity inputs: of the loaded model, or (a pre-quantized checkpoint) of
// --reference's, whose parameters are read for this and dropped.
const std::vector<std::vector<float>>& BenchRunner::Impl::reference_logits(const RunConfig& c,
                                                                           const std::string& fp32_model) {
  const std::string key = fmt::format("{}|{}", fp32_model, c.seq);
  auto it = fp32_logits.find(key);
  if (it != fp32_logits.end()) return it->second;
  if (fp32_model != c.model) {
    const auto ck = io::Checkpoint::open(fp32_model);
    const model::EncoderClassifier fp32(model::load_encoder_params(ck, model::load_encoder_config(fp32_model, ck)),
                                        model::fp32_linear_factory());
    return fp32_logits.emplace(key, run_fidelity_inputs(fp32, c)).first->second;
  }
  const model::EncoderClassifier fp32(*params, model::fp32_linear_factory());
  auto logits = run_fidelity_inputs(fp32, c);
  return fp32_logits.emplace(key, std::move(logits)).first->second;
}

}  // namespace qjoule::bench

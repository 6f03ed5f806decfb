// BenchRunner's decoder runs: prefill and decode timed in their own energy windows, the FP32
// reference of the pseudo-random-prompt fidelity, and the text quality of bench --text.
#include "bench/bench_runner_impl.h"
#include "kernels/cpu/weight_only/panel_matmul.h"

namespace qjoule::bench {

// Last-token logits of min(fidelity_examples, kDecoderFidelityPrompts) prompts of `n` tokens.
std::vector<std::vector<float>> BenchRunner::Impl::decoder_fidelity_logits(const model::DecoderLM& m,
                                                                           std::size_t n) const {
  const std::size_t count = std::min(options.fidelity_examples, kDecoderFidelityPrompts);
  const auto ids = decoder_prompt_ids(m.config().vocab_size, count, n);
  auto cache = m.make_cache(static_cast<int64_t>(n));
  std::vector<std::vector<float>> out(count, std::vector<float>(static_cast<std::size_t>(m.config().vocab_size)));
  for (std::size_t p = 0; p < count; ++p) {
    cache.clear();
    m.forward(ids.data() + p * n, static_cast<int64_t>(n), cache, out[p].data(), static_cast<int64_t>(n) - 1);
  }
  return out;
}

const std::vector<std::vector<float>>& BenchRunner::Impl::decoder_reference_logits(const RunConfig& c,
                                                                                   const std::string& fp32_model) {
  const std::string key = fmt::format("{}|{}", fp32_model, c.seq);
  auto it = fp32_logits.find(key);
  if (it != fp32_logits.end()) return it->second;
  const auto start = Clock::now();
  fmt::print(stderr,
             "\nFP32 reference for '{}': last-token logits of {} pseudo-random prompts of {} tokens, FP32 weights "
             "streamed one layer at a time (once per model and seq; bench --text FILE measures quality on real "
             "text instead)",
             fp32_model, std::min(options.fidelity_examples, kDecoderFidelityPrompts), c.seq);
  const model::DecoderLM fp32 = model::load_decoder_lm_streamed(fp32_model);  // one layer in FP32 at a time
  auto logits = decoder_fidelity_logits(fp32, c.seq);
  fmt::print(stderr, "\nFP32 reference for '{}': done in {:.1f} s\n", fp32_model,
             std::chrono::duration<double>(Clock::now() - start).count());
  return fp32_logits.emplace(key, std::move(logits)).first->second;
}

void BenchRunner::Impl::run_decoder(const RunConfig& c, RunRecord& r) {
  const std::size_t n = c.seq, steps = options.decode_tokens;
  r.prefill_tokens = n;
  r.decode_tokens = steps;
  // What validate_configs checks, for runs that did not go through it.
  if (c.batch != 1)
    fail("batch {} with decoder model '{}': decoder runs time one sequence, expected batch 1", c.batch, c.model);
  if (steps == 0) fail("0 decode tokens, expected at least 1 (--decode-tokens)");
  if (c.precision.spec_or_fail().smoothquant_alpha)
    fail("precision '{}': SmoothQuant is not supported for decoder model '{}'", c.precision, c.model);
  // One model's parameters at a time: an encoder's cached ones are not needed here.
  params.reset();
  tokenizer.reset();
  loaded_model.clear();
  if (!options.dataset.empty())
    r.notes.push_back(
        fmt::format("--dataset {} is a classification set: not used for decoder models (qjoule ppl "
                    "measures their accuracy)",
                    options.dataset));

  // The device first (one line why not), as validate_configs checks it.
  const bool on_gpu = kernels::is_cuda_device(c.device);
  const int gpu_index = on_gpu ? kernels::require_cuda_device(c.device) : -1;
  if (!on_gpu && c.device != "cpu") kernels::require_cuda_device(c.device);  // names what was wrong

  // Predicted before anything is built: a run that would not fit is skipped, never killed midway. On a
  // GPU the model is in GPU memory, which the prediction (of host memory) does not cover.
  // Calibrated weights first (read from the sweep's folder, or calibrated once for the sweep): not part of
  // the run's memory or time.
  const auto calibrated = calibrated_weights(c, r);
  kernels::avx512::release_panel_scratch();  // the previous run's weight-only panels
  reset_peak_rss();  // returns freed memory first, so the baseline is what this process really holds
  MemoryPrediction predicted = predict_peak_memory(c, steps, current_rss_bytes().value_or(0));
  if (on_gpu) predicted.unavailable = "the model is in GPU memory; the prediction is of host memory";
  const auto available = available_memory_bytes();
  if (predicted.unavailable.empty() && available && predicted.peak_bytes() - predicted.baseline_bytes > *available)
    fail(
        "skipped, not run: predicted peak memory {} MiB ({} MiB for the model) is more than the {} MiB available "
        "(MemAvailable)",
        predicted.peak_bytes() >> 20, predicted.model_bytes >> 20, *available >> 20);

  // The FP32 reference first, so its model is gone before this run's is built: the text's
  // log-probabilities (computed once per sweep, kept in the results folder), else the last-token
  // logits of pseudo-random prompts.
  // A pre-quantized checkpoint has no FP32 weights to compare with: its references come from the
  // unquantized model (--reference, or --kl-base for the text).
  const auto quantization = [&] {
    const auto ck = io::Checkpoint::open(c.model);
    return model::load_decoder_config(c.model, ck).quantization;
  }();
  if (quantization) r.weights_source = "checkpoint: " + quantization->describe();
  const std::string& fp32_model = quantization ? options.lm.reference : c.model;
  const std::vector<std::vector<float>> no_reference;
  const auto& reference = lm.enabled() || fp32_model.empty() ? no_reference : decoder_reference_logits(c, fp32_model);
  if (lm.enabled()) lm.ensure_reference(c.model);
  tasks.ensure_reference(c.model, fp32_model);
  const bool rss_reset = reset_peak_rss();
  std::string unused;
  auto backend = model::device_backend(gpu_index, quant::LayerPolicy::uniform(c.precision));
  const model::DecoderLM m = model::load_decoder_lm(
      c.model,
      calibrated ? model::calibrated_linear_factory(backend.linears, calibrated, backend.int4_codes) : backend.linears,
      &unused, backend.ops, [&](model::DecoderParams& p) {
        if (calibrated) model::apply_calibrated_norms(p, *calibrated);
      });
  if (!unused.empty()) r.notes.push_back(unused);
  std::optional<HookGuard> hook;
  if (on_gpu) {
    hook.emplace(meter, fmt::format("cuda:{} cudaDeviceSynchronize", gpu_index), [&m] { m.synchronize(); });
    r.notes.push_back(fmt::format(
        "device: {}; every weight and the KV cache on the GPU ({} bytes of parameters); non-GEMM operations {}",
        m.device_name(), m.bytes_held(), m.nongemm_path()));
    r.notes.push_back(fmt::format(
        "latency: CUDA events on GPU {} around each prefill and each decode repetition (ids copied in, "
        "forwards, logits copied out, the host's argmax between decode steps); the energy windows synchronize "
        "GPU {} at both ends",
        gpu_index, gpu_index));
  }
  const auto& cfg = m.config();
  if (n + steps > static_cast<std::size_t>(cfg.max_positions))
    fail(
        "{} prompt tokens (seq) + {} decode tokens (--decode-tokens) = {} is more than the {} positions model '{}' "
        "has (max_position_embeddings)",
        n, steps, n + steps, cfg.max_positions, c.model);
  r.model_bytes = m.bytes_held();
  r.fp32_bytes = m.fp32_bytes();
  const auto head = m.head_report();
  r.head_format = head.format;
  r.head_bytes = head.bytes_held;
  record_kernels(r, m.kernel_path_counts());
  if (cfg.moe.num_experts > 0) {
    r.notes.push_back(fmt::format(
        "mixture of experts: {} of {} experts read a token in {} of {} layers (router FP32); the decode roof's "
        "bytes and FLOPs a token count those {} experts' Linears only, a prefill reads each expert once",
        cfg.moe.experts_per_token, cfg.moe.num_experts, cfg.moe_layer_count(), cfg.num_layers,
        cfg.moe.experts_per_token));
  }

  const auto prompt = decoder_prompt_ids(cfg.vocab_size, 1, n);
  // Every position in every layer: a ring's window would be copied to scratch at each timed decode step
  // (it goes back to the prompt, so it would hold more than its window), which a whole cache does not pay.
  auto cache = m.make_cache(static_cast<int64_t>(n + steps));
  std::vector<float> logits(static_cast<std::size_t>(cfg.vocab_size));
  const auto prefill = [&] {
    cache.clear();
    m.forward(prompt.data(), static_cast<int64_t>(n), cache, logits.data(), static_cast<int64_t>(n) - 1);
    test_slowdown();
  };
  int32_t first = 0;  // the token the prefill's logits pick: every decode repetition starts from it
  // Greedy decoding, the argmax that picks each next token included.
  const auto decode = [&] {
    cache.truncate(static_cast<int64_t>(n));
    int32_t token = first;
    for (std::size_t i = 0; i < steps; ++i) {
      m.forward(&token, 1, cache, logits.data(), 0);
      test_slowdown();
      token = argmax(logits);
    }
  };

  const double min_s = min_seconds();
  const bool tracing = !options.trace_dir.empty() && !meter.sensors().empty();
  if (tracing) meter.drain_trace([](const energy::TraceSample&) {});  // readings from before this run

  // Prefill phase, in its own window.
  for (std::size_t i = 0; i < options.warmup; ++i) prefill();
  std::optional<limits::HostCapacityProbe> host;  // around both phases, outside their energy windows
  if (!on_gpu) host.emplace(static_cast<int>(c.threads), /*read_bandwidth=*/true);
  energy::Window prefill_window = meter.begin_window(r.run_name + ":prefill");
  // On a GPU each repetition is timed by CUDA events (DecoderLM::timed_ms); on the CPU by the loop.
  const auto timed = [&](const std::function<void()>& body) {
    return [&, body]() -> std::optional<double> {
      if (on_gpu) return m.timed_ms(body);
      body();
      return std::nullopt;
    };
  };
  double prefill_seconds = 0;
  const std::vector<double> prefill_ms = time_self_timed_repetitions(timed(prefill), min_s, prefill_seconds);
  const energy::Measurement prefill_energy = meter.end_window(prefill_window);

  // Decode phase, in its own window: the prompt's keys and values come from one untimed prefill.
  prefill();
  first = argmax(logits);
  for (std::size_t i = 0; i < options.warmup; ++i) decode();
  energy::Window decode_window = meter.begin_window(r.run_name + ":decode");
  const WindowedRepetitions decode_run = time_in_energy_windows(timed(decode), min_s, r.run_name + ":decode");
  const energy::Measurement decode_energy = meter.end_window(decode_window);
  const std::vector<double>& decode_ms = decode_run.samples_ms;
  if (on_gpu && !m.decode_step_path().empty()) r.notes.push_back("decode step: " + m.decode_step_path());
  const auto host_measured = host ? std::optional(host->finish()) : std::nullopt;

  if (tracing) {  // one trace over both phases (and the untimed prefill between them)
    std::filesystem::create_directories(options.trace_dir);
    energy::TraceCsvWriter trace(options.trace_dir / (r.run_name + ".csv"), meter);
    trace.drain(meter, prefill_energy.start_ns);
    trace.close();
  }

  // Prefill: the generic keys (one "batch" = one prefill of n tokens) and the phase's own.
  r.measured_seconds = prefill_seconds;
  r.iters = prefill_ms.size();
  r.latency = summarize_latency(prefill_ms);
  const double prefills = static_cast<double>(r.iters);
  r.sequences_per_s = prefills / prefill_seconds;
  r.tokens_per_s = prefills * static_cast<double>(n) / prefill_seconds;
  const auto [prefill_mean, prefill_sd] = mean_and_sd(rates(prefill_ms, n));
  r.prefill_tokens_per_s_mean = prefill_mean;
  r.prefill_tokens_per_s_std = prefill_sd;
  fill_device_energy(r, prefill_energy, gpu_index, prefills, prefills * static_cast<double>(n));
  r.prefill_mj_per_token = r.energy_mj_per_token;

  // Decode.
  r.decode_iters = decode_ms.size();
  const auto [decode_mean, decode_sd] = mean_and_sd(rates(decode_ms, steps));
  r.decode_tokens_per_s_mean = decode_mean;
  r.decode_tokens_per_s_std = decode_sd;
  r.decode_ms_per_token_mean = mean_and_sd(decode_ms).first / static_cast<double>(steps);
  if (const limits::MachineLimits* roofs = run_limits(r, gpu_index)) {
    record_roofline(r, *roofs, decoder_prefill_work(m, static_cast<int64_t>(n)), *r.tokens_per_s);
    const auto prompt_tokens = static_cast<int64_t>(n), decode_steps = static_cast<int64_t>(steps);
    record_decode_roofline(r, *roofs, decoder_decode_flops_per_token(m, prompt_tokens, decode_steps),
                           decoder_decode_bytes_per_token(m, prompt_tokens, decode_steps), decode_mean);
    if (host_measured) record_host_capacity(r, *host_measured, *roofs);
  }
  r.decode_energy_window = energy::to_json(decode_energy);
  // The decode phase's energy, and each window's: a GPU run's board alone, a CPU run's window total; none
  // where a counted sensor's window was too short for its updates.
  const auto energy_of = [&](const energy::Measurement& window) {
    std::string gpu_reason;
    const energy::EnergyTotal total = on_gpu ? gpu_total(window, gpu_index, gpu_reason) : window.total;
    WindowEnergy e = window_energy(window, total, !on_gpu);
    if (on_gpu && !e.energy_j && !total.energy_j) e.unavailable = gpu_reason;
    return e;
  };
  const WindowEnergy de = energy_of(decode_energy);
  if (decode_run.windows.size() > 1) {
    std::vector<WindowPerToken> per_window;
    for (std::size_t w = 0; w < decode_run.windows.size(); ++w) {
      const double tokens = static_cast<double>(decode_run.repetitions[w]) * static_cast<double>(steps);
      per_window.push_back(window_per_token(energy_of(decode_run.windows[w]), tokens));
    }
    if (de.basis_j) r.notes.push_back(windows_note(per_window, min_s));
  }
  if (on_gpu) {
    const auto sensor = options.gpu_energy_sensors.find(gpu_index);
    if (sensor != options.gpu_energy_sensors.end())
      for (const std::string& w : energy::clock_limit_warnings(decode_energy, {sensor->second}))
        r.notes.push_back(fmt::format("window `{}`: {}", decode_energy.name, w));
  }
  r.decode_energy_j = de.energy_j;
  r.decode_energy_unavailable = de.unavailable;
  if (de.basis_j)
    r.decode_mj_per_token = *de.basis_j * 1e3 / (static_cast<double>(decode_ms.size()) * static_cast<double>(steps));
  if (decode_energy.total.energy_j && !decode_energy.total.valid)
    r.notes.push_back("decode energy window flagged: see decode_energy_window");

  if (on_gpu)
    r.notes.push_back("peak_rss_bytes is host memory; the model's GPU memory is model_bytes (+ activations, KV cache)");
  record_peak_rss(r, rss_reset, predicted);

  // Task accuracy (after the timed phases and the peak-RSS reading: the scoring is not part of either).
  tasks.score(m, c.model, r);
  // Quality on the text (after the peak-RSS reading: the reference is mapped only while compared with).
  if (lm.enabled()) {
    lm.score(m, c.model, r);
    r.notes.push_back(fmt::format(
        "decoder: latency, throughput and energy_* are per prefill of {} prompt tokens; decode_* per {} greedy "
        "steps; quality: lm_* on the text (fidelity_* not computed)",
        n, steps));
    return;
  }
  r.lm_unavailable = "no --text given: bench --text FILE scores a text (perplexity, KL against FP32)";
  if (quantization && fp32_model.empty())
    r.notes.push_back(
        "fidelity to FP32 not measured: a pre-quantized checkpoint holds no FP32 weights (--reference DIR, its "
        "unquantized model, gives the FP32 run it is compared with)");
  if (quantization && !fp32_model.empty())
    r.notes.push_back(fmt::format("fidelity compares with the FP32 run of --reference {}", fp32_model));
  // Fidelity: the next-token distribution after each prompt, against FP32's.
  if (!reference.empty()) {
    const auto f = eval::compare_logits(reference, decoder_fidelity_logits(m, n));
    r.fidelity_top1_agreement = f.top1_agreement;
    r.fidelity_mean_kl = f.mean_kl;
    r.fidelity_max_abs_dlogit = f.max_abs_dlogit;
    r.fidelity_examples = f.examples;
  }
  r.notes.push_back(fmt::format(
      "decoder: latency, throughput and energy_* are per prefill of {} prompt tokens; decode_* per {} greedy "
      "steps; fidelity compares the last-token logits with FP32 on {} pseudo-random prompts; perplexity: bench "
      "--text FILE",
      n, steps, reference.size()));
}

}  // namespace qjoule::bench

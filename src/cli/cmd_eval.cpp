// `qjoule eval`: run a classifier over a labelled dataset and print its accuracy.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/calibration_options.h"
#include "cli/checkpoint_precision.h"
#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "cli/quant_options.h"
#include "qjoule/dataset.h"
#include "qjoule/error.h"
#include "qjoule/eval/classifier_eval.h"
#include "qjoule/eval/fidelity.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/cuda_device.h"
#include "qjoule/kernels/linear_cuda.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/calibrated_linear_factory.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/device_backend.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/unused_tensors.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"

namespace qjoule::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string dataset;
  std::size_t batch = 32;
  std::size_t max_length = 0;
  int threads = 0;
  std::string dump_logits;
  std::string text_column;
  std::string label_column;
  QuantArgs quant;
  bool smoothquant = false;
  std::string smoothquant_alpha;
  std::size_t calib = 128;  // SmoothQuant's examples
  bool calib_given = false;
  std::string calib_value;  // --calib: SmoothQuant's count (digits), or a calibration dataset
  CalibrationArgs calibration;
  std::string act_dtype = "f32";
  bool no_fidelity = false;
  std::string device = "cpu";
};

model::QuantizationOptions eval_quantization_options(const EvalArgs& a) {
  auto q = quantization_options(a.quant);
  if (a.smoothquant) {
    float alpha = 0.5f;
    try {
      if (!a.smoothquant_alpha.empty()) alpha = std::stof(a.smoothquant_alpha);
    } catch (const std::exception&) {
      fail("--smoothquant '{}' is not a number, expected an alpha in [0, 1]", a.smoothquant_alpha);
    }
    if (q.smoothquant_alpha >= 0.0f && q.smoothquant_alpha != alpha)
      fail("--smoothquant {} and --precision {} give two SmoothQuant alphas; expected one", alpha, a.quant.precision);
    q.smoothquant_alpha = alpha;
  }
  if (a.calib_given && q.smoothquant_alpha < 0.0f)
    fail(
        "--calib {} sets SmoothQuant's calibration, and SmoothQuant is off; expected --smoothquant [ALPHA] or "
        "--precision int8:sq=ALPHA",
        a.calib);
  return q;
}

void run_eval(const EvalArgs& a, CommandContext& /*ctx*/) {
  // --device first: without a usable GPU, that is the one line to say.
  const bool on_gpu = a.device != "cpu";
  const int gpu = on_gpu ? kernels::require_cuda_device(a.device) : -1;
  const auto qopts = eval_quantization_options(a);
  const auto policy = on_gpu ? parse_cuda_layer_policy(qopts) : parse_layer_policy(qopts);
  const auto act_dtype = model::parse_activation_dtype(a.act_dtype);
  if (on_gpu && a.smoothquant)
    fail(
        "--smoothquant --device {}: SmoothQuant runs on the CPU only (the GPU int8 layers quantize activations per "
        "token without smoothing); use --device cpu",
        a.device);
  use_threads(a.threads);

  if (model::model_family(a.model) == model::ModelFamily::Decoder)
    fail("{}: a decoder language model; qjoule eval scores sequence classifiers, qjoule ppl scores language models",
         a.model);
  const auto checkpoint = io::Checkpoint::open(a.model);
  auto params = model::load_encoder_params(checkpoint, model::load_encoder_config(a.model, checkpoint));
  if (const auto unused = model::unused_tensors_warning(checkpoint); !unused.empty())
    fmt::print(stderr, "warning: {}\n", unused);
  const model::EncoderConfig cfg = params.config;  // a copy: params is moved into the model below
  eval::DatasetOptions dopts;
  dopts.text_column = a.text_column;
  dopts.label_column = a.label_column;
  const auto dataset = eval::load_dataset(a.dataset, dopts);
  eval::check_labels(dataset, static_cast<int>(cfg.num_labels));

  std::optional<tokenize::WordPieceTokenizer> tokenizer;
  if (!dataset.pretokenized) tokenizer = tokenize::WordPieceTokenizer::from_model_dir(a.model);
  const auto* tok = tokenizer ? &*tokenizer : nullptr;

  // Calibrated precisions (int4:...:gptq, :awq): calibrated now on --calib's examples (a progress line a block).
  CalibrationArgs calib = a.calibration;
  std::string scored;  // read (once more) only to warn of an overlap with the calibration set
  if (model::policy_needs_calibration(policy) && !calib.settings.file.empty()) {
    scored = eval::read_text_file(a.dataset, "--dataset");
    calib.scored_text = "--dataset " + a.dataset;
    calib.scored = &scored;
  }
  std::string calibration;
  const auto calibrated = calibrate_if_asked(a.model, policy, calib, calibration);

  model::SmoothingFactors smoothing;
  if (qopts.smoothquant_alpha >= 0.0f) {
    eval::Dataset calib_set{dataset.path, {}, dataset.pretokenized, dataset.labeled};
    calib_set.examples.assign(dataset.examples.begin(),
                              dataset.examples.begin() + static_cast<long>(std::min(a.calib, dataset.examples.size())));
    smoothing = model::calibrate_smoothquant(params, qopts.smoothquant_alpha, [&](const model::EncoderClassifier& m) {
      eval::evaluate_classifier(m, tok, calib_set, {a.batch, a.max_length});
    });
    fmt::print(stderr, "smoothquant: alpha {}, calibrated on the first {} examples\n", qopts.smoothquant_alpha,
               calib_set.examples.size());
  }
  // The FP32 twin for fidelity: only when the run is not plain FP32 already.
  const bool plain_fp32 = policy.precision_spec().format == quant::Format::fp32 && policy.rules().empty() &&
                          act_dtype == model::ActivationDtype::f32;
  std::optional<model::EncoderParams> fp32_params;
  // A pre-quantized checkpoint has no FP32 weights: its fidelity needs its unquantized model.
  const bool prequantized = cfg.quantization.has_value();
  if (!a.no_fidelity && !plain_fp32 && !prequantized) fp32_params = params;
  // The model on its device: the one EncoderClassifier graph on the CPU backend, or on the CUDA backend
  // with every weight on GPU `gpu`.
  auto backend = model::device_backend(gpu, policy, std::move(smoothing));
  const model::EncoderClassifier m(
      std::move(params),
      calibrated ? model::calibrated_linear_factory(backend.linears, calibrated, backend.int4_codes) : backend.linears,
      act_dtype, backend.ops);
  const eval::ClassifierForward forward = [&m](const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                               float* logits) { m.forward(ids, mask, batch, seq, logits); };
  const auto kernel_counts = m.kernel_path_counts();
  const std::size_t bytes_held = m.bytes_held();
  const std::size_t fp32_bytes = m.fp32_bytes();

  std::size_t max_length = a.max_length;
  if (max_length > static_cast<std::size_t>(cfg.max_positions)) {
    fmt::print(stderr, "warning: --max-length {} exceeds the model's max_position_embeddings {}; using {}\n",
               max_length, cfg.max_positions, cfg.max_positions);
    max_length = static_cast<std::size_t>(cfg.max_positions);
  }

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto progress = [tty](std::size_t done, std::size_t total) {
    if (tty) fmt::print(stderr, "\r  {}/{} examples", done, total);
  };
  eval::ClassifierEvalOptions opts{a.batch, max_length};
  const auto result = eval::evaluate_classifier(cfg, forward, tok, dataset, opts, progress);
  if (tty) fmt::print(stderr, "\r\033[K");
  if (result.truncated > 0)
    fmt::print(stderr, "warning: {} of {} examples were longer than {} tokens and were truncated to it\n",
               result.truncated, result.total, result.max_length);

  fmt::print("model      {} ({}, {} labels)\n", a.model, cfg.architecture, cfg.num_labels);
  fmt::print("dataset    {}: {} examples{}\n", a.dataset, result.total, dataset.pretokenized ? " (pre-tokenized)" : "");
  if (on_gpu)
    fmt::print("device     {}: {} (every weight on the GPU; non-GEMM operations {})\n", a.device, m.device_name(),
               m.nongemm_path());
  fmt::print("precision  {}{}: {}\n", a.quant.precision,
             a.quant.precision_origin.empty() ? "" : " (" + a.quant.precision_origin + ")",
             kernel_summary(kernel_counts));
  if (!calibration.empty()) fmt::print("calibrated {}\n", calibration);
  fmt::print("size       {} held in {} ({} as FP32)\n", human_bytes(double(bytes_held)),
             on_gpu ? "GPU memory" : "memory", human_bytes(double(fp32_bytes)));
  fmt::print("accuracy   {}/{} = {:.4f}\n", result.correct, result.labelled, result.accuracy());
  fmt::print(
      "time       {:.2f} s ({:.1f} examples/s; batch {}, max length {}, {})\n", result.seconds,
      double(result.total) / result.seconds, a.batch, result.max_length,
      on_gpu ? fmt::format("GPU {}, tokenization on the CPU", gpu) : fmt::format("{} threads", kernels::num_threads()));
  if (!m.speed_representative()) fmt::print("activations {}\n", m.activation_path());
  if (prequantized && !a.no_fidelity) {
    fmt::print(
        "fidelity   unavailable: the checkpoint holds {} codes and no FP32 weights to compare with (`qjoule bench "
        "--reference DIR` compares it with its unquantized model)\n",
        cfg.quantization->describe());
  }
  if (fp32_params) {
    const model::EncoderClassifier reference(std::move(*fp32_params), model::fp32_linear_factory());
    const auto ref = eval::evaluate_classifier(reference, tok, dataset, opts);
    const auto f = eval::compare_logits(ref.logits, result.logits);
    fmt::print(
        "fidelity   top-1 agreement with FP32 {}/{} = {:.4f}, mean KL {:.3g} nats, max |Δlogit| {:.3g} "
        "(FP32 accuracy {}/{} = {:.4f})\n",
        f.top1_agree, f.examples, f.top1_agreement, f.mean_kl, f.max_abs_dlogit, ref.correct, ref.labelled,
        ref.accuracy());
  }
  if (!a.dump_logits.empty()) {
    eval::write_logits_tsv(a.dump_logits, result);
    fmt::print("logits     written to {}\n", a.dump_logits);
  }
}

}  // namespace

void add_eval_command(CLI::App& app, CommandContext& ctx) {
  auto* cmd = app.add_subcommand("eval", "Run a sequence classifier over a labelled dataset and print its accuracy.");
  cmd->footer(
      "Datasets: GLUE-style TSV with a header (sentence<TAB>label), any TSV/JSONL with named text and label\n"
      "columns, or JSONL with pre-tokenized input_ids (attention_mask and label optional).\n"
      "Example:\n"
      "  qjoule eval --model ../shared/data/models/sst2-distilbert-mini \\\n"
      "              --dataset ../shared/data/sst2/dev.tsv --dump-logits logits.tsv");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--model", a->model, "Model folder (config.json, safetensors, vocab.txt or tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--dataset", a->dataset, "Labelled dataset: .tsv or .jsonl")->required();
  add_quant_options(cmd, a->quant, "*.ffn.*=int4,*.layer.0.*=bf16");
  auto* sq = cmd->add_option("--smoothquant", a->smoothquant_alpha,
                             "int8: SmoothQuant with this alpha (default 0.5 when given without a value)")
                 ->expected(0, 1);
  auto* calib = cmd->add_option("--calib", a->calib_value,
                                "Calibration: for GPTQ / AWQ (int4:...:gptq, int4:...:awq) a dataset (.tsv, .jsonl; "
                                "labels not needed, e.g. SST-2's train.tsv) whose first --calib-sequences examples "
                                "calibrate; for SmoothQuant a number N, the first N examples of --dataset (default "
                                "128)");
  add_calibration_size_options(cmd, a->calibration.settings);
  cmd->add_option("--act-dtype", a->act_dtype,
                  "Activations between operations: f32, or bf16 (rounded to BF16 between operations; emulated on "
                  "CPUs without BF16 arithmetic, so its speed is labelled not representative)")
      ->capture_default_str();
  cmd->add_flag("--no-fidelity", a->no_fidelity,
                "Skip the FP32 reference run that a non-FP32 precision is compared with (top-1 agreement, "
                "mean KL, max |Δlogit|)");
  cmd->add_option("--batch", a->batch, "Sequences per forward pass (padded to the longest in the batch)")
      ->capture_default_str()
      ->check(in_range(1, 1e6));
  cmd->add_option("--max-length", a->max_length,
                  "Truncate sequences to this many tokens, [CLS] and [SEP] included "
                  "(default: the model's max_position_embeddings)")
      ->check(in_range(1, 1e6));
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)")->check(in_range(1, kMaxThreads));
  cmd->add_option("--device", a->device,
                  "cpu, or cuda / cuda:N: the whole model on GPU N (formats fp32, tf32, fp16, bf16, int8, fp8, int4, "
                  "nf4; where the CUDA backend is built and a GPU is usable)")
      ->capture_default_str();
  cmd->add_option("--dump-logits", a->dump_logits, "Write a TSV: index label pred logit0 logit1 ...");
  cmd->add_option("--text-column", a->text_column, "Name of the text column/field (default: sentence or text)");
  cmd->add_option("--label-column", a->label_column, "Name of the label column/field (default: label or labels)");
  cmd->callback([a, sq, calib, &ctx] {
    a->smoothquant = sq->count() > 0;
    if (calib->count() > 0) {
      // Digits: SmoothQuant's count (no file of that name); anything else: a calibration dataset.
      const std::string& v = a->calib_value;
      const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
      std::error_code ec;
      if (digits && !std::filesystem::exists(v, ec)) {
        if (v.size() > 10 || std::stoull(v) < 1 || std::stoull(v) > 1000000000ULL)
          fail("--calib: {} is out of range, expected 1 to 1000000000 (SmoothQuant's examples)", v);
        a->calib = static_cast<std::size_t>(std::stoull(v));
        a->calib_given = true;
      } else {
        if (!std::filesystem::is_regular_file(v, ec))
          fail("--calib {}: no such file; expected a calibration dataset (.tsv, .jsonl) or SmoothQuant's example count",
               v);
        a->calibration.settings.file = v;
      }
    }
    default_to_checkpoint_precision(a->quant, a->model);
    run_eval(*a, ctx);
  });
}

}  // namespace qjoule::cli

// `qjoule ppl`: perplexity of a decoder language model over a text file, with KL divergence, top-1
// agreement and ΔPPL against a saved FP32 run.
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/checkpoint_precision.h"
#include "cli/decoder_command.h"
#include "cli/roof_text.h"
#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/bench/sweep_identity.h"
#include "qjoule/eval/perplexity.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/model/decoder_config.h"

namespace qjoule::cli {
namespace {

struct PplArgs {
  std::string model, text;
  QuantArgs quant;
  CalibrationArgs calib;
  int64_t ctx = 0, stride = 0, max_tokens = 0;
  std::string kl_base, save_kl_base, json;
  int threads = 0;
  std::string device = "cpu";
};

void run_ppl(const PplArgs& a) {
  use_threads(a.threads);
  const std::string text = eval::read_text_file(a.text, "--text");
  CalibrationArgs calib = a.calib;
  calib.scored_text = "--text " + a.text;
  calib.scored = &text;
  auto d = load_decoder_for(a.model, a.quant, a.device, calib);
  const auto& cfg = d.model.config();
  const int64_t ctx = a.ctx > 0 ? a.ctx : std::min<int64_t>(512, cfg.max_positions);
  if (ctx > cfg.max_positions)
    fail("--ctx {} is beyond the model's max_position_embeddings = {}", ctx, cfg.max_positions);
  const int64_t stride = a.stride > 0 ? a.stride : std::max<int64_t>(1, ctx / 2);
  std::optional<eval::KlBase> base;
  if (!a.kl_base.empty()) base = eval::read_kl_base(a.kl_base);

  auto ids = d.tokenizer.encode(text, /*add_special_tokens=*/true);
  const auto all_tokens = ids.size();
  if (a.max_tokens > 0 && ids.size() > static_cast<size_t>(a.max_tokens)) ids.resize(static_cast<size_t>(a.max_tokens));

  print_decoder_header(a.model, d, a.quant);
  fmt::print(
      "text       {}: {} tokens{}\n", a.text, thousands(int64_t(ids.size())),
      ids.size() < all_tokens ? fmt::format(" (first of {}, --max-tokens)", thousands(int64_t(all_tokens))) : "");
  std::fflush(stdout);

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const std::string identity = bench::model_identity(a.model);
  // A pre-quantized checkpoint's reference is its unquantized model's: another identity, same tokens.
  if (base && !base->identity.empty() && !cfg.quantization) {
    const auto id = nlohmann::json::parse(base->identity, nullptr, false);
    if (id.is_object() && id.contains("model_identity") && id["model_identity"] != identity)
      fail("--kl-base {}: computed for another model (identity {}{}), not {} (identity {})", a.kl_base,
           id["model_identity"].dump(), id.contains("model") ? ", " + id["model"].dump() : "", a.model, identity);
  }
  eval::PerplexityOptions opts;
  opts.ctx = ctx;
  opts.stride = stride;
  opts.kl_base = base ? &*base : nullptr;
  // --save-kl-base: written a window at a time (FILE.partial, renamed when done), never held whole.
  std::optional<eval::KlBaseWriter> writer;
  if (!a.save_kl_base.empty()) {
    eval::KlBase header;
    header.vocab_size = static_cast<int32_t>(cfg.vocab_size);
    header.ctx = ctx;
    header.stride = stride;
    header.token_ids = ids;
    for (const auto& w : eval::perplexity_windows(static_cast<int64_t>(ids.size()), ctx, stride))
      header.scored += w.end - w.score_from;
    header.identity =
        nlohmann::json{
            {"model", a.model}, {"model_identity", identity},     {"vocab", cfg.vocab_size},
            {"text", a.text},   {"tokens", ids.size()},           {"ctx", ctx},
            {"stride", stride}, {"precision", a.quant.precision}, {"computed_by", "qjoule ppl --save-kl-base"}}
            .dump();
    writer.emplace(a.save_kl_base, header, "--save-kl-base", /*resume=*/false);
    opts.fp16_log_probs = true;
    opts.on_window = [&writer](const eval::ScoredWindow& w) {
      writer->append_window(w.index, w.fp16_log_probs, w.scored, w.nll_sum);
    };
  }
  opts.progress = [tty](int64_t done, int64_t total) {
    if (tty) fmt::print(stderr, "\r  window {}/{}", done, total);
  };
  const auto r = eval::evaluate_perplexity(d.model, ids, opts);
  if (tty) fmt::print(stderr, "\r\033[K");

  fmt::print("windows    {} of up to {} tokens, stride {}: {} tokens scored\n", r.windows, ctx, stride,
             thousands(r.scored));
  fmt::print("perplexity {:.4f} ± {:.4f} (mean NLL {:.5f} nats)\n", r.ppl(), r.ppl_stderr(), r.nll_mean());
  // Each window forwards its tokens (the last one may be shorter) and takes logits for those it scores.
  double forwarded = 0.0;
  for (const auto& w : eval::perplexity_windows(r.n_tokens, r.ctx, r.stride)) forwarded += double(w.end - w.begin);
  fmt::print("time       {:.2f} s ({:.0f} tokens/s scored, {} threads; {})\n", r.seconds, double(r.scored) / r.seconds,
             kernels::num_threads(),
             r.windows > 0 ? prefill_roof_text(d.model, r.ctx, std::max<int64_t>(1, r.scored / r.windows),
                                               forwarded / r.seconds, d.on_gpu)
                           : std::string("no roof: nothing scored"));
  if (r.has_kl) {
    fmt::print("vs base    ΔPPL {:+.4f} ± {:.4f} (paired standard error; base PPL {:.4f}, {})\n", r.kl.delta_ppl,
               r.kl.delta_ppl_stderr, r.kl.base_ppl, a.kl_base);
    fmt::print(
        "KL         mean {:.6f} ± {:.6f}, median {:.6f}, p99 {:.6f}, max {:.6f} nats per token (KL(base ‖ this))\n",
        r.kl.mean_kl, r.kl.kl_stderr, r.kl.median_kl, r.kl.p99_kl, r.kl.max_kl);
    fmt::print("top token  same as the base's for {:.4f} of tokens (top-1 agreement); RMS Δp {:.6f}\n",
               r.kl.top1_agreement, r.kl.rms_dp);
  }
  if (writer) {
    writer->finish();
    fmt::print("kl base    written to {} ({})\n", a.save_kl_base,
               human_bytes(double(r.scored) * double(cfg.vocab_size) * 2 + double(ids.size()) * 4));
  }
  if (!a.json.empty()) {
    nlohmann::json j = {{"model", a.model},
                        {"architecture", cfg.architecture},
                        {"precision", a.quant.precision},
                        {"device", a.device == "cpu" ? std::string("cpu") : d.model.device_name()},
                        {"kernels", d.model.kernel_path_counts()},
                        {"bytes_held", d.model.bytes_held()},
                        {"fp32_bytes", d.model.fp32_bytes()},
                        {"text", a.text},
                        {"n_tokens", r.n_tokens},
                        {"ctx", r.ctx},
                        {"stride", r.stride},
                        {"windows", r.windows},
                        {"scored_tokens", r.scored},
                        {"nll_sum", r.nll_sum},
                        {"ppl", r.ppl()},
                        {"ppl_stderr", r.ppl_stderr()},
                        {"nll_mean", r.nll_mean()},
                        {"seconds", r.seconds},
                        {"threads", kernels::num_threads()}};
    if (!d.calibration.empty()) j["calibration"] = d.calibration;
    if (r.has_kl)
      j["kl"] = {{"base", a.kl_base},           {"mean_kl", r.kl.mean_kl},
                 {"median_kl", r.kl.median_kl}, {"p99_kl", r.kl.p99_kl},
                 {"max_kl", r.kl.max_kl},       {"top1_agreement", r.kl.top1_agreement},
                 {"rms_dp", r.kl.rms_dp},       {"base_ppl", r.kl.base_ppl},
                 {"delta_ppl", r.kl.delta_ppl}, {"delta_ppl_stderr", r.kl.delta_ppl_stderr},
                 {"kl_stderr", r.kl.kl_stderr}};
    write_output("--json", a.json, j.dump(2) + "\n");
  }
}

}  // namespace

void add_ppl_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand("ppl",
                                 "Perplexity of a decoder language model over a text file, optionally with "
                                 "KL divergence and top-1 agreement against a saved FP32 run.");
  cmd->footer(
      "The text is tokenized whole (with the tokenizer's BOS), cut to --max-tokens, and scored in windows of --ctx\n"
      "tokens every --stride tokens; each window scores only the tokens the previous one did not.\n"
      "Examples:\n"
      "  qjoule ppl --model MODEL --text ../shared/data/wikitext2/test.txt --max-tokens 4096 --save-kl-base fp32.kl\n"
      "  qjoule ppl --model MODEL --text ../shared/data/wikitext2/test.txt --max-tokens 4096 --precision nf4 "
      "--kl-base fp32.kl");
  auto a = std::make_shared<PplArgs>();
  cmd->add_option("--model", a->model, "Model folder (config.json, safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--text", a->text, "UTF-8 text file to score")->required();
  add_quant_options(cmd, a->quant, "*.mlp.*=int4,*.layers.0.*=bf16");
  add_calibration_options(cmd, a->calib.settings);
  cmd->add_option("--ctx", a->ctx, "Tokens per window (default: 512 or max_position_embeddings if smaller)")
      ->check(in_range(2, 1e7));
  cmd->add_option("--stride", a->stride, "Tokens between window starts (default: half of --ctx)")
      ->check(in_range(1, 1e7));
  cmd->add_option("--max-tokens", a->max_tokens, "Score only the first N tokens of the text (0, the default: all)")
      ->check(zero_or_range(2, 1e12));
  cmd->add_option("--kl-base", a->kl_base, "Compare with a base run saved by --save-kl-base (same text and options)");
  cmd->add_option("--save-kl-base", a->save_kl_base,
                  "Save this run's log-probabilities (FP16, scored tokens × vocab × 2 bytes) as a KL base");
  cmd->add_option("--json", a->json, "Also write the result as JSON to this file ('-' for stdout)");
  cmd->add_option("--device", a->device, kDecoderDeviceHelp)->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)")->check(in_range(1, kMaxThreads));
  cmd->callback([a] {
    default_to_checkpoint_precision(a->quant, a->model);
    run_ppl(*a);
  });
}

}  // namespace qjoule::cli

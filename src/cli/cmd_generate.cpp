// `qjoule generate`: greedy generation from a prompt with a decoder language model, for a quick look
// at what a quantized model says, with prefill and decode speeds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/checkpoint_precision.h"
#include "cli/decoder_command.h"
#include "cli/roof_text.h"
#include "cli/flag_ranges.h"
#include "qjoule/error.h"
#include "qjoule/kernels/threads.h"

namespace qjoule::cli {
namespace {

// The generated ids as text; an id the tokenizer has no token for (a model whose vocabulary is padded
// past its tokenizer's) is shown as <id N> rather than ending the command.
std::string decode_text(const tokenize::BpeTokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string text;
  std::vector<int32_t> run;
  const auto flush = [&] {
    if (!run.empty()) text += tokenizer.decode(run, /*skip_special_tokens=*/true);
    run.clear();
  };
  for (const int32_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) {
      run.push_back(id);
    } else {
      flush();
      text += fmt::format("<id {}>", id);
    }
  }
  flush();
  return text;
}

struct GenerateArgs {
  std::string model, prompt;
  QuantArgs quant;
  CalibrationArgs calib;
  int64_t max_new = 32;
  int threads = 0;
  std::string device = "cpu";
};

int32_t argmax(const std::vector<float>& x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

void run_generate(const GenerateArgs& a) {
  use_threads(a.threads);
  auto d = load_decoder_for(a.model, a.quant, a.device, a.calib);
  const auto& cfg = d.model.config();
  const auto prompt = d.tokenizer.encode(a.prompt, /*add_special_tokens=*/true);
  if (prompt.empty()) fail("--prompt: the prompt has no tokens, expected some text");
  if (static_cast<int64_t>(prompt.size()) >= cfg.max_positions)
    fail("--prompt has {} tokens, but the model's max_position_embeddings = {} leaves no room to generate",
         prompt.size(), cfg.max_positions);
  const int64_t budget = std::min<int64_t>(a.max_new, cfg.max_positions - static_cast<int64_t>(prompt.size()));
  print_decoder_header(a.model, d, a.quant);

  using clock = std::chrono::steady_clock;
  // No going back: a sliding-window layer holds its window only (KvCache), however long the generation.
  auto cache = d.model.make_cache(static_cast<int64_t>(prompt.size()) + budget, /*rewind=*/0);
  std::vector<float> logits(static_cast<size_t>(cfg.vocab_size));
  // One untimed prefill and decode step first: kernels are set up (JIT, packing) on their first call.
  d.model.forward(prompt.data(), static_cast<int64_t>(prompt.size()), cache, logits.data(),
                  static_cast<int64_t>(prompt.size()) - 1);
  if (budget > 1) {
    const int32_t warm = argmax(logits);
    d.model.forward(&warm, 1, cache, logits.data(), 0);
  }
  cache.clear();
  const auto t0 = clock::now();
  d.model.forward(prompt.data(), static_cast<int64_t>(prompt.size()), cache, logits.data(),
                  static_cast<int64_t>(prompt.size()) - 1);
  const auto t1 = clock::now();
  std::vector<int32_t> generated;
  std::string stop = fmt::format("--max-new {}", a.max_new);
  if (budget < a.max_new) stop = fmt::format("max_position_embeddings {}", cfg.max_positions);
  int32_t next = argmax(logits);
  while (true) {
    generated.push_back(next);
    if (cfg.eos_token_id && next == *cfg.eos_token_id) {
      stop = "end of sequence";
      break;
    }
    if (static_cast<int64_t>(generated.size()) >= budget) break;
    d.model.forward(&next, 1, cache, logits.data(), 0);
    next = argmax(logits);
  }
  const auto t2 = clock::now();
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  const auto decode_steps = static_cast<double>(generated.size() - 1);
  const auto prompt_tokens = static_cast<int64_t>(prompt.size());
  fmt::print("prefill    {} tokens in {:.1f} ms ({:.0f} tokens/s; {})\n", prompt.size(), prefill_s * 1e3,
             double(prompt.size()) / prefill_s,
             prefill_roof_text(d.model, prompt_tokens, 1, double(prompt.size()) / prefill_s, d.on_gpu));
  if (decode_steps > 0)
    fmt::print("decode     {} tokens in {:.1f} ms ({:.1f} tokens/s, {}; {})\n", generated.size() - 1, decode_s * 1e3,
               decode_steps / decode_s,
               d.on_gpu ? d.model.device_name() : fmt::format("{} threads", kernels::num_threads()),
               decode_roof_text(d.model, prompt_tokens, static_cast<int64_t>(decode_steps), decode_steps / decode_s,
                                d.on_gpu));
  if (d.on_gpu && !d.model.decode_step_path().empty()) fmt::print("decode     step: {}\n", d.model.decode_step_path());
  fmt::print("stopped    {} after {} new tokens\n\n", stop, generated.size());
  fmt::print("{}", d.tokenizer.decode(prompt, /*skip_special_tokens=*/true));
  fmt::print("{}\n", decode_text(d.tokenizer, generated));
}

}  // namespace

void add_generate_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand("generate",
                                 "Greedy text generation from a prompt with a decoder language model "
                                 "(a quick look at a quantized model's output and speed).");
  cmd->footer(
      "Example:\n  qjoule generate --model MODEL --prompt 'The capital of France is' --max-new 16 --precision int8");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("--model", a->model, "Model folder (config.json, safetensors, tokenizer.json)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt", a->prompt, "The text to continue")->required();
  cmd->add_option("--max-new", a->max_new, "Most tokens to generate (stops earlier at the end-of-sequence token)")
      ->capture_default_str()
      ->check(in_range(1, 1e6));
  add_quant_options(cmd, a->quant, "*.mlp.*=int4,*.layers.0.*=bf16");
  add_calibration_options(cmd, a->calib.settings);
  cmd->add_option("--device", a->device, kDecoderDeviceHelp)->capture_default_str();
  cmd->add_option("--threads", a->threads, "CPU threads (default: all cores)")->check(in_range(1, kMaxThreads));
  cmd->callback([a] {
    default_to_checkpoint_precision(a->quant, a->model);
    run_generate(*a);
  });
}

}  // namespace qjoule::cli

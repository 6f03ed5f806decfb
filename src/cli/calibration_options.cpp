#include "cli/calibration_options.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::cli {
namespace {

// Whether a stretch of `calibration` (its start, middle or end, 200 characters each; all of it from 50
// characters up) occurs in `scored`.
bool overlaps(const std::string& calibration, const std::string& scored) {
  constexpr std::size_t kProbe = 200;
  if (calibration.size() < kProbe) {  // a few words occur anywhere: only a whole paragraph counts
    return calibration.size() >= kProbe / 4 && scored.find(calibration) != std::string::npos;
  }
  for (std::size_t at : {std::size_t{0}, (calibration.size() - kProbe) / 2, calibration.size() - kProbe}) {
    if (scored.find(std::string_view(calibration).substr(at, kProbe)) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

void add_calibration_options(CLI::App* cmd, CalibrationArgs& a) {
  cmd->add_option(
         "--calib", a.file,
         "UTF-8 text to calibrate on, for precisions that need it (int4:...:gptq, int4:...:awq): tokenized whole and cut "
         "into --calib-sequences windows of --calib-tokens consecutive tokens, the first ones (deterministic)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calib-sequences", a.sequences, "calibration sequences (GPTQ, AWQ)")
      ->default_val(64)
      ->check(in_range(1, 100000));
  cmd->add_option("--calib-tokens", a.tokens,
                  "tokens per calibration sequence (default: 512, or the model's max_position_embeddings if fewer)")
      ->check(in_range(1, 1 << 20));
  cmd->add_option("--calib-damp", a.damp, "GPTQ damping: this fraction of the mean of diag(XᵀX) added to its diagonal")
      ->default_val(0.01)
      ->check(above(0.0, 10.0));
}

std::shared_ptr<const model::CalibratedInt4> calibrate_if_asked(const std::string& dir,
                                                                const quant::LayerPolicy& policy,
                                                                const CalibrationArgs& a, std::string& summary) {
  const bool asked = model::policy_needs_calibration(policy);
  if (!asked && a.file.empty()) return nullptr;
  if (!asked)
    fail("--calib {}: no layer's precision calibrates; expected it with a calibrated one (e.g. int4:g=128:gptq)",
         a.file);
  if (a.file.empty())
    fail(
        "precision '{}' needs calibration inputs; expected --calib FILE (a UTF-8 text, e.g. WikiText-2's train or "
        "valid split)",
        policy.precision());
  const std::string text = eval::read_text_file(a.file, "--calib");
  if (a.scored != nullptr && overlaps(text, *a.scored)) {
    fmt::print(stderr,
               "warning: --calib {} overlaps the text being scored (--text {}): the calibrated format is "
               "then scored on text it was fitted to\n",
               a.file, a.scored_text);
  }
  const auto ck = io::Checkpoint::open(dir);
  const auto config = model::load_decoder_config(dir, ck);
  const int64_t len = a.tokens > 0 ? a.tokens : std::min<int64_t>(512, config.max_positions);
  if (len > config.max_positions)
    fail("--calib-tokens {} is beyond the model's max_position_embeddings = {}", len, config.max_positions);
  const auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(dir);
  const auto ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  const auto sequences = model::calibration_windows(ids, a.sequences, len, "--calib " + a.file);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  model::CalibrationOptions options;
  options.damp = a.damp;
  options.progress = [tty](const std::string& line) {
    if (tty) {
      fmt::print(stderr, "\r\033[K  {}", line);
    } else {
      fmt::print(stderr, "  {}\n", line);
    }
    std::fflush(stderr);
  };
  auto calibrated =
      std::make_shared<const model::CalibratedInt4>(model::calibrate_decoder(dir, policy, sequences, options));
  if (tty) fmt::print(stderr, "\r\033[K");
  const bool gptq = calibrated->method.find("GPTQ") != std::string::npos;
  summary = fmt::format("{} on {}: {} sequences × {} tokens{}, {} Linears in {:.1f} s", calibrated->method, a.file,
                        calibrated->sequences, calibrated->tokens_per_sequence,
                        gptq ? fmt::format(", damp {}", calibrated->damp) : "", calibrated->codes.size(),
                        calibrated->seconds);
  return calibrated;
}

}  // namespace qjoule::cli

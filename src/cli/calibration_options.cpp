#include "cli/calibration_options.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "cli/flag_ranges.h"
#include "cli/format_util.h"
#include "qjoule/error.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/bench/calibration_cache.h"
#include "qjoule/kernels/threads.h"

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

void add_calibration_options(CLI::App* cmd, bench::CalibrationSettings& a) {
  cmd->add_option(
         "--calib", a.file,
         "what calibrated precisions (int4:...:gptq, int4:...:awq) calibrate on: for a language model a UTF-8 text, "
         "tokenized whole and cut into --calib-sequences windows of --calib-tokens consecutive tokens, the first ones; "
         "for a classifier a dataset (.tsv, .jsonl), its first --calib-sequences examples cut to --calib-tokens")
      ->check(CLI::ExistingFile);
  add_calibration_size_options(cmd, a);
}

void add_calibration_size_options(CLI::App* cmd, bench::CalibrationSettings& a) {
  cmd->add_option("--calib-sequences", a.sequences, "calibration sequences (GPTQ, AWQ): windows, or examples")
      ->default_val(64)
      ->check(in_range(1, 100000));
  cmd->add_option("--calib-tokens", a.tokens,
                  "tokens per calibration sequence, at most (default: 512, or the model's max_position_embeddings if "
                  "fewer)")
      ->check(in_range(1, 1 << 20));
  cmd->add_option("--calib-damp", a.damp, "GPTQ damping: this fraction of the mean of diag(XᵀX) added to its diagonal")
      ->default_val(0.01)
      ->check(above(0.0, 10.0));
}

std::shared_ptr<model::CalibratedInt4> calibrate_if_asked(const std::string& dir, const quant::LayerPolicy& policy,
                                                          const CalibrationArgs& a, std::string& summary) {
  const bool asked = model::policy_needs_calibration(policy);
  if (!asked && a.settings.file.empty()) return nullptr;
  if (!asked)
    fail("--calib {}: no layer's precision calibrates; expected it with a calibrated one (e.g. int4:g=128:gptq)",
         a.settings.file);
  if (a.settings.file.empty()) fail("{}", model::calibration_file_needed(policy.precision()));
  const std::string text = eval::read_text_file(a.settings.file, "--calib");
  if (a.scored != nullptr && overlaps(text, *a.scored)) {
    fmt::print(stderr,
               "warning: --calib {} overlaps the text being scored ({}): the calibrated format is "
               "then scored on text it was fitted to\n",
               a.settings.file, a.scored_text);
  }
  const auto sequences = bench::calibration_sequences_for(dir, text, a.settings);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  model::CalibrationOptions options;
  options.damp = a.settings.damp;
  options.bf16_products = bench::calibration_bf16_products(kernels::num_threads());
  options.progress = [tty](const std::string& line) {
    if (tty) {
      fmt::print(stderr, "\r\033[K  {}", line);
    } else {
      fmt::print(stderr, "  {}\n", line);
    }
    std::fflush(stderr);
  };
  auto calibrated = std::make_shared<model::CalibratedInt4>(bench::calibrate_model(dir, policy, sequences, options));
  if (tty) fmt::print(stderr, "\r\033[K");
  summary = bench::calibration_summary(*calibrated, a.settings.file);
  return calibrated;
}

}  // namespace qjoule::cli

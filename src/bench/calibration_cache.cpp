#include "qjoule/bench/calibration_cache.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "qjoule/bench/sweep_identity.h"
#include "qjoule/error.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/calibrated_int4_file.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/tokenize/bpe_tokenizer.h"

namespace qjoule::bench {

std::vector<std::vector<int32_t>> calibration_windows_for(const std::string& model, const std::string& text,
                                                          const CalibrationSettings& s) {
  const auto ck = io::Checkpoint::open(model);
  const auto config = model::load_decoder_config(model, ck);
  const int64_t len = s.tokens > 0 ? s.tokens : std::min<int64_t>(512, config.max_positions);
  if (len > config.max_positions)
    fail("--calib-tokens {} is beyond the model's max_position_embeddings = {}", len, config.max_positions);
  const auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(model);
  const auto ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  return model::calibration_windows(ids, s.sequences, len, "--calib " + s.file);
}

nlohmann::json calibration_identity_entry(const CalibrationSettings& s) {
  if (s.file.empty()) return nullptr;
  return {{"file", s.file},
          {"text_hash", content_hash(eval::read_text_file(s.file, "--calib"))},
          {"sequences", s.sequences},
          {"tokens", s.tokens},
          {"damp", s.damp}};
}

std::string calibration_file_needed(const std::string& precision) {
  return fmt::format(
      "precision '{}' needs calibration inputs; expected --calib FILE (a UTF-8 text, e.g. WikiText-2's train or valid "
      "split)",
      precision);
}

std::string calibration_summary(const model::CalibratedInt4& c, const std::string& file) {
  const bool gptq = c.method.find("GPTQ") != std::string::npos;
  return fmt::format("{} on {}: {} sequences × {} tokens{}, {} Linears in {:.1f} s", c.method, file, c.sequences,
                     c.tokens_per_sequence, gptq ? fmt::format(", damp {}", c.damp) : "", c.codes.size(), c.seconds);
}

CalibrationCache::CalibrationCache(CalibrationSettings settings, std::filesystem::path out,
                                   std::function<void(const std::string&)> note)
    : settings_(std::move(settings)), out_(std::move(out)), note_(std::move(note)) {}

std::shared_ptr<model::CalibratedInt4> CalibrationCache::get(const std::string& model,
                                                             const quant::Precision& precision) {
  const quant::FormatSpec& spec = precision.spec_or_fail();
  if (settings_.file.empty()) fail("{}", calibration_file_needed(precision.text()));
  if (text_.empty()) text_ = eval::read_text_file(settings_.file, "--calib");
  const std::string model_id = model_identity(model);
  const std::string identity = fmt::format("model {} ({}), {}, --calib {} (text {}), {} sequences × {} tokens, damp {}",
                                           model, model_id, quant::to_string(spec), settings_.file, content_hash(text_),
                                           settings_.sequences, settings_.tokens, settings_.damp);
  const auto path =
      out_ / kCalibratedDirName /
      fmt::format("{}-{}-{}.qjcal", model_id, quant::run_token(spec), content_hash(identity).substr(0, 8));
  std::shared_ptr<model::CalibratedInt4> out;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    try {
      out = std::make_shared<model::CalibratedInt4>(model::read_calibrated_int4(path, identity));
      if (announced_.insert(identity).second)
        note_(fmt::format("calibrated weights of {} read from {} (calibrated once: {})", quant::to_string(spec),
                          path.string(), calibration_summary(*out, settings_.file)));
    } catch (const Error& e) {
      note_(fmt::format("warning: {}; calibrating again", e.what()));
    }
  }
  if (!out) {
    const auto sequences = calibration_windows_for(model, text_, settings_);
    model::CalibrationOptions options;
    options.damp = settings_.damp;
    options.progress = [this](const std::string& line) { note_("  " + line); };
    note_(fmt::format("calibrating {} of {} on --calib {} ({} sequences × {} tokens)", quant::to_string(spec), model,
                      settings_.file, sequences.size(), sequences.front().size()));
    out = std::make_shared<model::CalibratedInt4>(
        model::calibrate_decoder(model, quant::LayerPolicy::uniform(precision), sequences, options));
    model::write_calibrated_int4(path, *out, identity);
    announced_.insert(identity);
  }
  return out;
}

}  // namespace qjoule::bench

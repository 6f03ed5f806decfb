#include "qjoule/bench/calibration_cache.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "qjoule/bench/sweep_identity.h"
#include "qjoule/error.h"
#include "qjoule/dataset.h"
#include "qjoule/eval/text_file.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/threads.h"
#include "qjoule/limits/limits_cache.h"
#include "qjoule/model/calibration/calibrated_int4_file.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/calibration/encoder_calibration.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/quant/format_spec.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/tokenize/bpe_tokenizer.h"
#include "qjoule/tokenize/wordpiece_tokenizer.h"

namespace qjoule::bench {
namespace {

// --calib-tokens, or its default, within the model's positions.
int64_t calibration_length(const CalibrationSettings& s, int64_t max_positions) {
  const int64_t len = s.tokens > 0 ? s.tokens : std::min<int64_t>(512, max_positions);
  if (len > max_positions)
    fail("--calib-tokens {} is beyond the model's max_position_embeddings = {}", len, max_positions);
  return len;
}

}  // namespace

std::vector<std::vector<int32_t>> calibration_windows_for(const std::string& model, const std::string& text,
                                                          const CalibrationSettings& s) {
  const auto ck = io::Checkpoint::open(model);
  const int64_t len = calibration_length(s, model::load_decoder_config(model, ck).max_positions);
  const auto tokenizer = tokenize::BpeTokenizer::from_tokenizer_json(model);
  const auto ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  return model::calibration_windows(ids, s.sequences, len, "--calib " + s.file);
}

std::vector<std::vector<int32_t>> calibration_examples_for(const std::string& model, const std::string& file,
                                                           const CalibrationSettings& s) {
  const auto ck = io::Checkpoint::open(model);
  const int64_t len = calibration_length(s, model::load_encoder_config(model, ck).max_positions);
  if (len < 2) fail("--calib-tokens {}: expected at least 2 ([CLS] and [SEP])", len);
  eval::DatasetOptions options;
  options.require_labels = false;
  const auto dataset = eval::load_dataset(file, options);
  const int64_t have = static_cast<int64_t>(dataset.examples.size());
  if (have < s.sequences)
    fail(
        "--calib {}: {} examples, too few for {} calibration sequences; expected a larger dataset (the training split), "
        "or fewer sequences (--calib-sequences)",
        file, have, s.sequences);
  std::optional<tokenize::WordPieceTokenizer> tokenizer;
  if (!dataset.pretokenized) tokenizer = tokenize::WordPieceTokenizer::from_model_dir(model);
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < s.sequences; ++i) {
    const auto& e = dataset.examples[static_cast<std::size_t>(i)];
    std::vector<int32_t> ids = tokenizer ? tokenizer->encode(e.text, static_cast<std::size_t>(len)).ids : e.input_ids;
    if (static_cast<int64_t>(ids.size()) > len) {  // pre-tokenized: cut, keeping the final [SEP]
      const int32_t last = ids.back();
      ids.resize(static_cast<std::size_t>(len));
      ids.back() = last;
    }
    out.push_back(std::move(ids));
  }
  return out;
}

std::vector<std::vector<int32_t>> calibration_sequences_for(const std::string& model, const std::string& text,
                                                            const CalibrationSettings& settings) {
  if (model::model_family(model) == model::ModelFamily::Decoder) return calibration_windows_for(model, text, settings);
  return calibration_examples_for(model, settings.file, settings);
}

model::CalibratedInt4 calibrate_model(const std::string& model, const quant::LayerPolicy& policy,
                                      const std::vector<std::vector<int32_t>>& sequences,
                                      const model::CalibrationOptions& options) {
  if (model::model_family(model) == model::ModelFamily::Decoder)
    return model::calibrate_decoder(model, policy, sequences, options);
  return model::calibrate_encoder(model, policy, sequences, options);
}

bool calibration_bf16_products(int threads) {
  const auto m = limits::machine_limits(threads).limits;
  const double bf16 = std::max(m.bf16_gflops.value_or(0.0), m.amx_bf16_gflops.value_or(0.0));
  return m.fp32_gflops && bf16 > *m.fp32_gflops;
}

nlohmann::json calibration_identity_entry(const CalibrationSettings& s) {
  if (s.file.empty()) return nullptr;
  return {{"file", s.file},
          {"text_hash", content_hash(eval::read_text_file(s.file, "--calib"))},
          {"sequences", s.sequences},
          {"tokens", s.tokens},
          {"damp", s.damp}};
}

std::string calibration_summary(const model::CalibratedInt4& c, const std::string& file) {
  const bool gptq = c.method.find("GPTQ") != std::string::npos;
  const std::string sizes =
      c.tokens == c.sequences * c.tokens_per_sequence
          ? fmt::format("{} sequences × {} tokens", c.sequences, c.tokens_per_sequence)
          : fmt::format("{} sequences of up to {} tokens ({} in all)", c.sequences, c.tokens_per_sequence, c.tokens);
  return fmt::format("{} on {}: {}{}{}, {} Linears in {:.1f} s{}", c.method, file, sizes,
                     gptq ? fmt::format(", damp {}", c.damp) : "", c.bf16_products ? ", BF16 recording products" : "",
                     c.codes.size(), c.seconds,
                     c.round_to_nearest.empty()
                         ? ""
                         : fmt::format("; {} of them round-to-nearest: no calibration token reached them (experts "
                                       "the router never chose)",
                                       c.round_to_nearest.size()));
}

CalibrationCache::CalibrationCache(CalibrationSettings settings, std::filesystem::path out,
                                   std::function<void(const std::string&)> note)
    : settings_(std::move(settings)), out_(std::move(out)), note_(std::move(note)) {}

std::shared_ptr<model::CalibratedInt4> CalibrationCache::get(const std::string& model,
                                                             const quant::Precision& precision) {
  const quant::FormatSpec& spec = precision.spec_or_fail();
  if (settings_.file.empty()) fail("{}", model::calibration_file_needed(precision.text()));
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
    const auto sequences = calibration_sequences_for(model, text_, settings_);
    model::CalibrationOptions options;
    options.damp = settings_.damp;
    options.bf16_products = calibration_bf16_products(kernels::num_threads());
    options.progress = [this](const std::string& line) { note_("  " + line); };
    note_(fmt::format("calibrating {} of {} on --calib {} ({} sequences)", quant::to_string(spec), model,
                      settings_.file, sequences.size()));
    out = std::make_shared<model::CalibratedInt4>(
        calibrate_model(model, quant::LayerPolicy::uniform(precision), sequences, options));
    model::write_calibrated_int4(path, *out, identity);
    announced_.insert(identity);
  }
  return out;
}

}  // namespace qjoule::bench

// Calibrated weights in a sweep (`bench --calib FILE`): each (model, precision, calibration text and
// sizes) calibrated once (model/calibration/decoder_calibration.h), its result kept in the sweep's folder
// (OUT/calibrated/<model identity>-<run token>-<settings hash>.qjcal, model/calibration/calibrated_int4_file.h) so that
// the sweep's other runs of that precision and its `--resume` read it instead of calibrating again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qjoule/bench/calibration_settings.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/quant/layer_policy.h"
#include "qjoule/quant/precision.h"

namespace qjoule::bench {

inline constexpr const char* kCalibratedDirName = "calibrated";

// The calibration windows of `text` (the contents of settings.file) for decoder `model`: tokenized whole
// with the model's tokenizer, the first settings.sequences windows of settings.tokens tokens. Too few
// tokens, or windows longer than the model's positions, is one line.
std::vector<std::vector<int32_t>> calibration_windows_for(const std::string& model, const std::string& text,
                                                          const CalibrationSettings& settings);

// The calibration sequences of encoder classifier `model` from dataset `file` (.tsv or .jsonl, as `qjoule
// eval` reads them; labels not needed): the first settings.sequences examples, tokenized as the classifier
// reads them ([CLS] … [SEP]), each cut to settings.tokens (0: min(512, the model's positions)). Too few
// examples is one line.
std::vector<std::vector<int32_t>> calibration_examples_for(const std::string& model, const std::string& file,
                                                           const CalibrationSettings& settings);

// The calibration sequences of `model` (decoder: windows of `text`; encoder: examples of settings.file).
std::vector<std::vector<int32_t>> calibration_sequences_for(const std::string& model, const std::string& text,
                                                            const CalibrationSettings& settings);

// Calibrates `model` (a decoder or an encoder classifier, model/calibration/decoder_calibration.h and
// model/calibration/encoder_calibration.h) on `sequences` for the calibrated Linears of `policy`.
model::CalibratedInt4 calibrate_model(const std::string& model, const quant::LayerPolicy& policy,
                                      const std::vector<std::vector<int32_t>>& sequences,
                                      const model::CalibrationOptions& options);

// Whether calibration's recording pass should multiply in BF16 on this machine with `threads` threads
// (model::CalibrationOptions::bf16_products): where its measured BF16 peak (AVX512_BF16 dot products, or
// AMX tiles) is above its FP32 FMA peak (`qjoule limits`, cached per machine; measured first if need be).
bool calibration_bf16_products(int threads);

// The sweep identity's entry for `settings` (sweep_identity.h): {"file", "text_hash", "sequences",
// "tokens", "damp"}; null without --calib.
nlohmann::json calibration_identity_entry(const CalibrationSettings& settings);

// "AWQ on valid.txt: 64 sequences × 512 tokens, 154 Linears in 812.3 s" ("damp 0.01" for GPTQ, ", BF16
// recording products" where they were); sequences
// of several lengths (an encoder's examples): "GPTQ on train.tsv: 512 sequences of up to 66 tokens (10,950 in
// all), damp 0.01, 24 Linears in 3.1 s".
std::string calibration_summary(const model::CalibratedInt4& c, const std::string& file);

class CalibrationCache {
 public:
  // `note` prints a line (a progress line per block, where the result came from).
  CalibrationCache(CalibrationSettings settings, std::filesystem::path out,
                   std::function<void(const std::string&)> note);

  // The calibrated weights of `model` in `precision` (a calibrated int4): read from the sweep's file, or
  // calibrated now and written there. Each call returns a copy of its own (calibrated_linear_factory
  // moves the codes into the model, so nothing holds them twice during a run).
  std::shared_ptr<model::CalibratedInt4> get(const std::string& model, const quant::Precision& precision);
  const CalibrationSettings& settings() const { return settings_; }

 private:
  CalibrationSettings settings_;
  std::filesystem::path out_;
  std::function<void(const std::string&)> note_;
  std::string text_;                 // read once
  std::set<std::string> announced_;  // identities whose source was said
};

}  // namespace qjoule::bench

// The calibration flags of the decoder commands (`qjoule ppl`, `generate`): --calib FILE and its
// sizes, and the calibration run (GPTQ, AWQ) they start where the layer policy asks for a calibrated
// format (int4:...:gptq, int4:...:awq).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qjoule/bench/calibration_settings.h"
#include "qjoule/model/decoder_calibration.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::cli {

struct CalibrationArgs {
  bench::CalibrationSettings settings;  // --calib FILE, --calib-sequences, --calib-tokens, --calib-damp
  std::string scored_text;              // the command's --text, if any: an overlap is named in a warning
  const std::string* scored = nullptr;  // its contents, as the command read them (not read again)
};

// --calib and its sizes (ppl, generate, bench).
void add_calibration_options(CLI::App* cmd, bench::CalibrationSettings& s);

// The calibrated codes of `dir` for `policy` (progress on stderr), or nullptr where no Linear asks for them.
// A calibrated precision without --calib, or --calib without one, is one line; so is a bad calibration
// text (unreadable, empty, not UTF-8, too few tokens). `summary` receives the header's line.
std::shared_ptr<model::CalibratedInt4> calibrate_if_asked(const std::string& dir, const quant::LayerPolicy& policy,
                                                          const CalibrationArgs& a, std::string& summary);

}  // namespace qjoule::cli

// The calibration flags (`qjoule ppl`, `generate`, `eval`, `export`, `bench`): --calib FILE and its
// sizes, and the calibration run (GPTQ, AWQ) they start where the layer policy asks for a calibrated
// format (int4:...:gptq, int4:...:awq).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "qjoule/bench/calibration_settings.h"
#include "qjoule/model/calibration/decoder_calibration.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::cli {

struct CalibrationArgs {
  bench::CalibrationSettings settings;  // --calib FILE, --calib-sequences, --calib-tokens, --calib-damp
  std::string scored_text;              // what the command scores ("--text test.txt"): an overlap is named in a warning
  const std::string* scored = nullptr;  // its contents, as the command read them (not read again)
};

// --calib and its sizes (ppl, generate, bench, export).
void add_calibration_options(CLI::App* cmd, bench::CalibrationSettings& s);
// The sizes alone (eval, whose --calib also takes SmoothQuant's count).
void add_calibration_size_options(CLI::App* cmd, bench::CalibrationSettings& s);

// The calibrated codes of `dir` for `policy` (progress on stderr), or nullptr where no Linear asks for them.
// A calibrated precision without --calib, or --calib without one, is one line; so is a bad calibration
// text (unreadable, empty, not UTF-8, too few tokens). `summary` receives the header's line.
std::shared_ptr<model::CalibratedInt4> calibrate_if_asked(const std::string& dir, const quant::LayerPolicy& policy,
                                                          const CalibrationArgs& a, std::string& summary);

}  // namespace qjoule::cli

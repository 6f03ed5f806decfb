// A calibration's result on disk (model/calibration/decoder_calibration.h's CalibratedInt4), so that a sweep and its
// `--resume` calibrate each (model, precision, calibration text and sizes) once: a safetensors file whose
// tensors are each Linear's int4 blocks as bytes ("<linear>.blocks", U8, the blocks of formats.h as
// they lie in memory) and, where calibration changed them, biases ("<linear>.bias") and norms
// ("<norm>.weight", "<norm>.bias"), F32; its metadata the method, sizes, seconds, each Linear's layout
// ("int4:g=32:sym"), rows, columns and a8, and `identity` (what it was calibrated from, checked on read).
#pragma once

#include <filesystem>
#include <string>

#include "qjoule/model/calibration/decoder_calibration.h"

namespace qjoule::model {

// Written to a temporary file beside `path`, then renamed over it.
void write_calibrated_int4(const std::filesystem::path& path, const CalibratedInt4& calibrated,
                           const std::string& identity);

// The file as written with this `identity`; a file that is not one, is damaged, or holds another identity
// is one line naming it and what differs.
CalibratedInt4 read_calibrated_int4(const std::filesystem::path& path, const std::string& identity);

}  // namespace qjoule::model

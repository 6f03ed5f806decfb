// How a sweep calibrates the precisions that need it (int4:...:gptq, int4:...:awq): bench's --calib
// flags (bench/calibration_cache.h does the work).
#pragma once

#include <cstdint>
#include <string>

namespace qjoule::bench {

struct CalibrationSettings {
  std::string file;        // --calib: a UTF-8 text ("" = none)
  int64_t sequences = 64;  // --calib-sequences
  int64_t tokens = 0;      // --calib-tokens (0: min(512, the model's max_position_embeddings))
  double damp = 0.01;      // --calib-damp (GPTQ)
};

}  // namespace qjoule::bench

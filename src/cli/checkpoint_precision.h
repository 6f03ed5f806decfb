// A pre-quantized checkpoint (GPTQ, AWQ, bitsandbytes) runs in its own format wherever no precision was
// asked for: `ppl`, `generate`, `eval` without --precision, `bench` without --precisions.
#pragma once

#include <optional>
#include <string>

#include "cli/quant_options.h"

namespace qjoule::cli {

struct CheckpointPrecision {
  std::string spec;    // the format its codes run as, e.g. "int4:g=64:asym"
  std::string origin;  // "the checkpoint's own format: gptq 4-bit, group_size 64, ..."
};

// `dir`'s own format when its config.json says it is pre-quantized (model::checkpoint_quantization_of);
// nullopt for an unquantized model or a folder without config.json. A malformed config.json or a broken
// quantization_config is one line naming the file and field.
std::optional<CheckpointPrecision> checkpoint_precision(const std::string& dir);

// Without --precision on the command line: quant.precision becomes `dir`'s own format, and
// quant.precision_origin says so (nothing changes for an unquantized model).
void default_to_checkpoint_precision(QuantArgs& quant, const std::string& dir);

}  // namespace qjoule::cli

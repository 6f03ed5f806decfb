#include "cli/checkpoint_precision.h"

#include "qjoule/model/prequantized/checkpoint_quantization.h"
#include "qjoule/model/prequantized/prequantized_linear.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::cli {

std::optional<CheckpointPrecision> checkpoint_precision(const std::string& dir) {
  const auto q = model::checkpoint_quantization_of(dir);
  if (!q) return std::nullopt;
  return CheckpointPrecision{quant::to_string(model::prequantized_spec(*q)),
                             "the checkpoint's own format: " + q->describe()};
}

void default_to_checkpoint_precision(QuantArgs& quant, const std::string& dir) {
  if (quant.precision_flag != nullptr && quant.precision_flag->count() > 0) return;
  if (const auto own = checkpoint_precision(dir)) {
    quant.precision = own->spec;
    quant.precision_origin = own->origin;
  }
}

}  // namespace qjoule::cli

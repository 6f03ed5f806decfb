// The calibrated model: its Linears built from calibrated int4 codes (calibrated_int4.h) with the
// kernels round-to-nearest's int4 runs, on the CPU or (through a device backend's Int4CodesLinear) a GPU,
// and the norms AWQ's scales were folded into put back into the parameters.
#pragma once

#include <memory>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/encoder_classifier.h"

namespace qjoule::model {

// The CPU's: kernels::make_linear_int4_packed (the GPU's: model::device_backend's int4_codes).
Int4CodesLinear cpu_int4_codes_linear();

// The factory of the calibrated model: a Linear (or fused Q|K|V, gate|up) whose every part has codes is
// built from them by `build` (with its calibrated bias), the codes moved out of `calibrated` into it (so the
// model holds them once); any other Linear from `fallback` (the same device's factory).
LinearFactory calibrated_linear_factory(LinearFactory fallback, std::shared_ptr<CalibratedInt4> calibrated,
                                        Int4CodesLinear build = cpu_int4_codes_linear());

// Replaces the norms of `params` that `calibrated` changed; a changed norm the model does not have is one
// line naming it (codes from another model).
void apply_calibrated_norms(DecoderParams& params, const CalibratedInt4& calibrated);

}  // namespace qjoule::model

// StreamedLinearF32: an FP32 Linear that holds no weights. Each forward reads its weight and bias from
// the checkpoint (converted to FP32 from the stored dtype, the mapped pages released afterwards),
// multiplies with qjoule's FP32 Linear and drops them, so a model built from these holds one layer's
// FP32 weights at a time. It is slow by design (every forward converts every weight): it computes
// reference outputs once per sweep, never a timed run.
#pragma once

#include <functional>
#include <memory>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/encoder_params.h"

namespace qjoule::model {

// `load` fills a LinearParams' weight and bias (DecoderParams::load_linear); `shape` names the Linear
// and gives its shape, its weight and bias left empty.
std::unique_ptr<kernels::Linear> make_streamed_linear_f32(LinearParams shape, std::function<void(LinearParams&)> load);

}  // namespace qjoule::model

// One Linear standing for several that read the same input (Q | K | V, gate | up): their weight rows
// concatenated in order, biases likewise (zeros for a part without one), `fused_from` naming the parts.
// A factory builds it when the parts would run in one format, or returns nullptr, and the model then
// builds the parts apart (encoder_classifier.h, decoder_lm.h).
#pragma once

#include <string>
#include <vector>

#include "qjoule/model/encoder_params.h"

namespace qjoule::model {

// "a.b.q_lin", "a.b.k_lin", "a.b.v_lin" -> "a.b.q_lin+k_lin+v_lin".
std::string fused_name(const std::vector<std::string>& names);

// The fused params of `parts` (at least two, each with its weights loaded and the same in_features;
// else one line naming the part). The parts keep their weights.
LinearParams fuse_linear_params(const std::vector<const LinearParams*>& parts);

}  // namespace qjoule::model

// A Linear whose weight columns were stored in another order than its inputs: y = W' · x[perm], with
// W' the inner Linear's [out, in] weight whose column j is input perm[j]. A GPTQ act-order checkpoint
// (desc_act, g_idx: model/prequantized/prequantized_linear.h) quantizes the inputs in an order of its own; sorting
// them by group makes each group contiguous, so that the codes are qjoule's int4 blocks, and the
// activations are gathered into that order on each call (one copy of [m, in] floats, into a buffer
// reused across calls). kernel_path() is the inner one's prefixed with "gather(act-order)+".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/kernels/linear.h"

namespace qjoule::kernels {

// `perm` must be a permutation of [0, inner->in_features()) (checked: one line otherwise).
std::unique_ptr<Linear> make_linear_input_permuted(std::unique_ptr<Linear> inner, std::vector<int32_t> perm,
                                                   const std::string& tensor_name);

}  // namespace qjoule::kernels

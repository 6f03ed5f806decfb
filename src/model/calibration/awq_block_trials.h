// AWQ's clipping on a post-LN block (BERT's), chosen by the block's output: each Linear's clipping
// (awq_block.h) lowers that Linear's own output error on the calibration inputs, but in a post-LN block
// those errors pass through the attention's softmax, GELU and LayerNorm before the next block reads them,
// and a clipping that lowers one Linear's error can raise the block's. So, as AWQ's reference measures
// Q, K, V's scales on the attention's output rather than on each Linear's, each clipping is kept only where
// the block's output comes closer to the unquantized block's: starting from every Linear at round-to-
// nearest, V, O, FFN-in and FFN-out in turn take their clipped round trip, kept where Σ ‖y − y_fp32‖² over
// the calibration tokens drops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/calibration/awq_block.h"

namespace qjoule::model::detail {

// b: the block's AWQ Linears (scale_awq_block already run); here: every calibrated Linear of the block (the
// others run their FP32 weights during the trials); states: the block's inputs, [tokens, hidden] each;
// forward runs the block on x in place. Leaves each AWQ Linear's weights clipped or not as chosen, ready
// for finish_awq_block(..., clip = false).
void choose_awq_clipping_by_block_output(AwqBlock& b, const std::map<std::string, CalibratingLinear*>& here,
                                         const std::vector<std::vector<float>>& states, int64_t hidden,
                                         const std::function<void(float* x, int64_t tokens)>& forward,
                                         const quant::AwqOptions& options);

}  // namespace qjoule::model::detail

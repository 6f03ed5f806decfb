// AWQ on a post-LN classifier (BERT's, DistilBERT's), its changes chosen by the classifier's output. There
// AWQ's scales fold only into V's rows (for O), and its clippings, each chosen where the block's output
// comes closer to the unquantized block's (awq_block_trials.h), lower that error yet can raise the
// divergence of the classifier's logits, which read one direction of the last [CLS] state: on the SST-2
// DistilBERT the block-chosen changes gave a higher mean KL than round-to-nearest on the very calibration
// sentences, at every group size and scheme. So once every block is calibrated, the model starts from
// round-to-nearest's codes in every AWQ Linear and takes AWQ's changes one unit at a time, in block order
// (V with O, whose scales live in V's rows; FFN-in; FFN-out), keeping a unit only where the mean KL of the
// classifier's logits to the FP32 model's drops on both halves of the calibration examples (the even and
// the odd ones: a change that helps one half only is fitted to it; with every change measured on both,
// the SST-2 DistilBERT's dev set followed in all six layouts, where one mean over all examples kept changes
// that raised dev's KL at g64 asym). The codes of each Linear are AWQ's or round-to-nearest's, so on the
// calibration examples the result is never further from FP32 than round-to-nearest's.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/calibration/calibrating_linear.h"

namespace qjoule::model::detail {

struct AwqChoice {
  int units = 0, kept = 0;  // AWQ's units, and those kept
  double rtn_kl = 0.0;      // mean KL to FP32 on the calibration examples with none kept
  double kl = 0.0;          // ... with the kept ones (below rtn_kl on both halves, or equal: none kept)
};

// units: each a group of calibrated AWQ Linears that change together (keep_round_to_nearest_alternative
// called on each before AWQ changed it); reference: the FP32 model's logits of each calibration example;
// logits(i, out): the calibrated model's logits of example i as its Linears stand. Leaves every Linear
// running the chosen codes and puts round-to-nearest's into `out` where a unit was not kept.
AwqChoice keep_awq_where_the_logits_come_closer(const std::vector<std::vector<CalibratingLinear*>>& units,
                                                const std::vector<std::vector<float>>& reference,
                                                const std::function<void(std::size_t i, float* out)>& logits,
                                                CalibratedInt4& out);

// Mean over the examples of KL(softmax(reference) ‖ softmax(logits)), each row `labels` wide.
double mean_logit_kl(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& logits);

}  // namespace qjoule::model::detail

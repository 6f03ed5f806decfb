// How closely a quantized model's outputs follow the FP32 model's on the same inputs: the numbers
// that say what a format costs when there are no labels, or beside the accuracy when there are.
#pragma once

#include <cstddef>
#include <vector>

namespace qjoule::eval {

struct Fidelity {
  std::size_t examples = 0;
  std::size_t top1_agree = 0;   // examples whose argmax equals the reference's
  double top1_agreement = 0.0;  // top1_agree / examples
  double mean_kl = 0.0;         // mean over examples of KL(softmax(reference) || softmax(run)), in nats
  double max_abs_dlogit = 0.0;  // largest |run - reference| over every logit
};

// reference, run: [example][label] logits of the same examples in the same order. Shapes that
// disagree, or an empty set, are an error naming both shapes.
Fidelity compare_logits(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& run);

}  // namespace qjoule::eval

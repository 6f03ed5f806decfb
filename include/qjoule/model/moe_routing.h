// A mixture-of-experts router's choice, as transformers makes it (MixtralTopKRouter, Qwen2MoeTopKRouter):
// softmax over every expert's logit in FP32, the top k probabilities (the lower expert index first on a tie),
// then, when normalising, each divided by the sum of the k.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qjoule::model {

struct ExpertRoute {
  int64_t token = 0;
  float weight = 0.0f;
};

// The tokens each expert runs, in token order, with their weights: result[e] for e < experts. `logits` is
// [tokens, experts]. A NaN logit is never chosen over a number (a token whose logits are all NaN takes the first
// k experts, with NaN weights, so that the NaN reaches the output rather than being hidden).
std::vector<std::vector<ExpertRoute>> route_top_k(std::span<const float> logits, int64_t tokens, int64_t experts,
                                                  int64_t k, bool normalize);

}  // namespace qjoule::model

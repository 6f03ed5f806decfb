// No score is ever computed from a non-finite output: accuracy, fidelity and perplexity check the
// logits they read and end with one line naming where the first NaN or Inf is.
#pragma once

#include <cstddef>
#include <string_view>

namespace qjoule::eval {

// Fails "<what>: the model's logit <index> is NaN (or +Inf/-Inf); no <score> is computed from
// non-finite outputs" at the first non-finite value of logits[0, n).
void require_finite_logits(const float* logits, std::size_t n, std::string_view what, std::string_view score);

}  // namespace qjoule::eval

#include "qjoule/eval/finite_logits.h"

#include <cmath>

#include "qjoule/error.h"

namespace qjoule::eval {

void require_finite_logits(const float* logits, std::size_t n, std::string_view what, std::string_view score) {
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isfinite(logits[i])) continue;
    const char* found = std::isnan(logits[i]) ? "NaN" : (logits[i] > 0 ? "+Inf" : "-Inf");
    fail(
        "{}: the model's logit {} is {}; no {} is computed from non-finite outputs (check the weights and the "
        "format's range)",
        what, i, found, score);
  }
}

}  // namespace qjoule::eval

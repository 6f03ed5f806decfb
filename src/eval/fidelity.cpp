#include "qjoule/eval/fidelity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "qjoule/eval/finite_logits.h"
#include "qjoule/error.h"

namespace qjoule::eval {
namespace {

std::size_t argmax(const std::vector<float>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// log-softmax in double, stable for large logits.
std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(double(l) - top);
  const double log_sum = std::log(sum) + top;
  std::vector<double> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - log_sum;
  return out;
}

}  // namespace

Fidelity compare_logits(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& run) {
  if (reference.size() != run.size())
    fail("fidelity: the reference has {} examples and the run {}, expected the same examples", reference.size(),
         run.size());
  if (reference.empty()) fail("fidelity: no examples to compare");
  Fidelity f;
  f.examples = reference.size();
  double kl_sum = 0.0;
  for (std::size_t e = 0; e < reference.size(); ++e) {
    const auto& ref = reference[e];
    const auto& got = run[e];
    if (ref.size() != got.size() || ref.empty())
      fail("fidelity: example {} has {} reference logits and {} run logits, expected the same non-zero count", e,
           ref.size(), got.size());
    require_finite_logits(ref.data(), ref.size(), fmt::format("fidelity, example {} (FP32 reference)", e), "fidelity");
    require_finite_logits(got.data(), got.size(), fmt::format("fidelity, example {}", e), "fidelity");
    if (argmax(ref) == argmax(got)) ++f.top1_agree;
    const auto lp = log_softmax(ref);
    const auto lq = log_softmax(got);
    double kl = 0.0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      kl += std::exp(lp[i]) * (lp[i] - lq[i]);
      f.max_abs_dlogit = std::max(f.max_abs_dlogit, std::fabs(double(got[i]) - double(ref[i])));
    }
    kl_sum += std::max(kl, 0.0);  // rounding can leave -1e-17 for identical distributions
  }
  f.top1_agreement = double(f.top1_agree) / double(f.examples);
  f.mean_kl = kl_sum / double(f.examples);
  return f;
}

}  // namespace qjoule::eval

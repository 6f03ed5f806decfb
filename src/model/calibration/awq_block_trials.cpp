#include "model/calibration/awq_block_trials.h"

#include <utility>

namespace qjoule::model::detail {
namespace {

// The round trip of l's format of w.
std::vector<float> round_trip(const CalibratingLinear& l, const std::vector<float>& w) {
  std::vector<float> out(w.size());
  with_int4_block(l.spec(), [&]<class Block>(Block) {
    quant::int4_round_trip<Block>(w.data(), l.shape().out_features, l.shape().in_features, out.data(), l.shape().name);
  });
  return out;
}

// Σ ‖y − reference‖² over the block's outputs y of `states` as the block's Linears stand.
double block_output_error(const std::vector<std::vector<float>>& states,
                          const std::vector<std::vector<float>>& reference, int64_t hidden,
                          const std::function<void(float* x, int64_t tokens)>& forward) {
  double sum = 0.0;
  std::vector<float> y;
  for (std::size_t s = 0; s < states.size(); ++s) {
    y = states[s];
    forward(y.data(), static_cast<int64_t>(y.size()) / hidden);
    for (std::size_t t = 0; t < y.size(); ++t) {
      const double d = double(y[t]) - double(reference[s][t]);
      sum += d * d;
    }
  }
  return sum;
}

}  // namespace

void choose_awq_clipping_by_block_output(AwqBlock& b, const std::map<std::string, CalibratingLinear*>& here,
                                         const std::vector<std::vector<float>>& states, int64_t hidden,
                                         const std::function<void(float* x, int64_t tokens)>& forward,
                                         const quant::AwqOptions& options) {
  for (const auto& [name, l] : here) l->set_trial_weights(&l->weight());
  std::vector<std::vector<float>> reference;  // the unquantized block's outputs
  for (const auto& x : states) {
    reference.push_back(x);
    forward(reference.back().data(), static_cast<int64_t>(x.size()) / hidden);
  }
  // Every AWQ Linear at round-to-nearest, then each clipping tried in turn.
  struct Trial {
    CalibratingLinear* l;
    std::vector<float> plain;  // round-to-nearest's round trip
  };
  std::vector<Trial> trials;
  for (CalibratingLinear* l : {b.q, b.k, b.v, b.o, b.up, b.down}) {
    if (l == nullptr) continue;
    trials.push_back({l, round_trip(*l, l->weight())});
    l->set_trial_weights(&trials.back().plain);
  }
  double best = block_output_error(states, reference, hidden, forward);
  for (const Trial& t : trials) {
    if (t.l == b.q || t.l == b.k) continue;  // errors through the softmax: never clipped (awq_block.h)
    std::vector<float> clipped = t.l->weight();
    with_int4_block(t.l->spec(), [&]<class Block>(Block) {
      quant::clip_awq<Block>(clipped.data(), t.l->shape().out_features, t.l->shape().in_features,
                             t.l->statistics().hessian, options, t.l->shape().name);
    });
    const std::vector<float> clipped_trip = round_trip(*t.l, clipped);
    t.l->set_trial_weights(&clipped_trip);
    if (const double e = block_output_error(states, reference, hidden, forward); e < best) {
      best = e;
      t.l->weight() = std::move(clipped);
    } else {
      t.l->set_trial_weights(&t.plain);
    }
  }
  for (const auto& [name, l] : here) l->set_trial_weights(nullptr);
}

}  // namespace qjoule::model::detail

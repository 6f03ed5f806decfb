#include "model/calibration/awq_classifier_choice.h"

#include <algorithm>
#include <cmath>

#include "qjoule/error.h"

namespace qjoule::model::detail {

double mean_logit_kl(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& logits) {
  if (reference.size() != logits.size() || reference.empty())
    fail("mean_logit_kl: {} reference rows and {} rows; expected the same number, at least one", reference.size(),
         logits.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const auto& p = reference[i];
    const auto& q = logits[i];
    if (p.size() != q.size() || p.empty()) fail("mean_logit_kl: row {} has {} and {} logits", i, p.size(), q.size());
    const double pm = *std::max_element(p.begin(), p.end()), qm = *std::max_element(q.begin(), q.end());
    double pz = 0.0, qz = 0.0;
    for (std::size_t j = 0; j < p.size(); ++j) {
      pz += std::exp(double(p[j]) - pm);
      qz += std::exp(double(q[j]) - qm);
    }
    const double plz = std::log(pz), qlz = std::log(qz);
    double kl = 0.0;
    for (std::size_t j = 0; j < p.size(); ++j) {
      const double lp = double(p[j]) - pm - plz, lq = double(q[j]) - qm - qlz;
      kl += std::exp(lp) * (lp - lq);
    }
    sum += kl;
  }
  return sum / double(reference.size());
}

namespace {

// The mean KL of the examples' logits to their references: all of them, and the even and the odd ones.
struct ExampleKl {
  double all = 0.0, even = 0.0, odd = 0.0;
};

ExampleKl example_kl(const std::vector<std::vector<float>>& reference, const std::vector<std::vector<float>>& rows) {
  ExampleKl k;
  k.all = mean_logit_kl(reference, rows);
  for (const bool odd : {false, true}) {
    std::vector<std::vector<float>> ref, got;
    for (std::size_t i = odd ? 1 : 0; i < rows.size(); i += 2) {
      ref.push_back(reference[i]);
      got.push_back(rows[i]);
    }
    (odd ? k.odd : k.even) = got.empty() ? k.all : mean_logit_kl(ref, got);
  }
  return k;
}

}  // namespace

AwqChoice keep_awq_where_the_logits_come_closer(const std::vector<std::vector<CalibratingLinear*>>& units,
                                                const std::vector<std::vector<float>>& reference,
                                                const std::function<void(std::size_t i, float* out)>& logits,
                                                CalibratedInt4& out) {
  std::vector<std::vector<float>> rows(reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) rows[i].resize(reference[i].size());
  const auto kl_now = [&] {
    for (std::size_t i = 0; i < rows.size(); ++i) logits(i, rows[i].data());
    return example_kl(reference, rows);
  };
  const auto run_round_to_nearest = [](const std::vector<CalibratingLinear*>& unit, bool on) {
    for (CalibratingLinear* l : unit) l->run_round_to_nearest(on);
  };
  AwqChoice choice;
  choice.units = static_cast<int>(units.size());
  for (const auto& unit : units) run_round_to_nearest(unit, true);
  ExampleKl best = kl_now();
  choice.rtn_kl = choice.kl = best.all;
  for (const auto& unit : units) {
    run_round_to_nearest(unit, false);
    if (const ExampleKl k = kl_now(); k.even < best.even && k.odd < best.odd) {
      best = k;
      choice.kl = k.all;
      ++choice.kept;
    } else {
      run_round_to_nearest(unit, true);
    }
  }
  for (const auto& unit : units) {
    for (CalibratingLinear* l : unit) {
      if (l->runs_round_to_nearest()) l->take_round_to_nearest(out);
    }
  }
  return choice;
}

}  // namespace qjoule::model::detail

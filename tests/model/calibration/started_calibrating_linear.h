// A CalibratingLinear over `original` (its weights handed over when it begins) in `spec`, recording its
// inputs' statistics of its own, begun: the one-Linear blocks of the AWQ trial and choice tests.
#pragma once

#include <memory>
#include <string>

#include "model/calibration/calibrating_linear.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::test {

inline std::unique_ptr<model::detail::CalibratingLinear> started_calibrating_linear(const model::LinearParams& original,
                                                                                    const std::string& spec) {
  model::LinearParams shape = original;
  shape.weight.clear();
  shape.bias.clear();
  auto l = std::make_unique<model::detail::CalibratingLinear>(
      shape, [p = original](model::LinearParams& q) { q = p; }, quant::parse_format_spec(spec),
      std::make_shared<model::detail::InputStatistics>(), /*records=*/true, /*bf16_products=*/false);
  l->begin();
  return l;
}

}  // namespace qjoule::test

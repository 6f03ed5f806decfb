#include "kernels/cpu/weight_only/fp4_scales.h"

#include "qjoule/quant/quantize_fp4.h"

namespace qjoule::kernels::detail {
namespace {

template <float (*Value)(uint8_t)>
std::array<float, 256> table_of() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) t[static_cast<std::size_t>(b)] = Value(static_cast<uint8_t>(b));
  return t;
}

}  // namespace

const std::array<float, 256>& e8m0_values() {
  static const std::array<float, 256> t = table_of<&quant::e8m0_value>();
  return t;
}

const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> t = table_of<&quant::e4m3_value>();
  return t;
}

}  // namespace qjoule::kernels::detail

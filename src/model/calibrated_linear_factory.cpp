#include "qjoule/model/calibrated_linear_factory.h"

#include <algorithm>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/kernels/linear_weight_only.h"

namespace qjoule::model {
namespace {

// The bias of Linear p (its parts `names` one after another): the checkpoint's, with the rows of each part
// whose bias calibration changed (AWQ's scales folded into V's or up's rows) replaced.
std::vector<float> calibrated_bias(const LinearParams& p, const std::vector<std::string>& names,
                                   const CalibratedInt4& calibrated) {
  std::vector<float> bias = p.bias;
  int64_t row = 0;
  for (const auto& n : names) {
    const auto& codes = calibrated.codes.at(n);
    const int64_t rows = std::visit([](const auto& m) { return m.rows; }, codes);
    if (const auto it = calibrated.biases.find(n); it != calibrated.biases.end()) {
      if (bias.empty()) bias.assign(static_cast<std::size_t>(p.out_features), 0.0f);
      if (static_cast<int64_t>(it->second.size()) != rows || row + rows > static_cast<int64_t>(bias.size()))
        fail("{}: a calibrated bias of {} values for {} rows; expected one a row", n, it->second.size(), rows);
      std::copy(it->second.begin(), it->second.end(), bias.begin() + row);
    }
    row += rows;
  }
  return bias;
}

}  // namespace

Int4CodesLinear cpu_int4_codes_linear() {
  return [](Int4Codes codes, const float* bias, const std::string& name, bool int8_activations) {
    return std::visit(
        [&](auto&& m) { return kernels::make_linear_int4_packed(std::move(m), bias, name, int8_activations); },
        std::move(codes));
  };
}

LinearFactory calibrated_linear_factory(LinearFactory fallback, std::shared_ptr<CalibratedInt4> calibrated,
                                        Int4CodesLinear build) {
  return [fallback = std::move(fallback), calibrated, build = std::move(build)](
             const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
    if (const auto it = calibrated->fp32_weights.find(p.name); it != calibrated->fp32_weights.end()) {
      if (static_cast<int64_t>(it->second.size()) != p.out_features * p.in_features)
        fail("{}: calibrated FP32 weights of {} values; expected {} × {}", p.name, it->second.size(), p.out_features,
             p.in_features);
      LinearParams changed = p;  // a mixture's router with AWQ's scales in its columns
      changed.weight = it->second;
      return fallback(changed, in_block);
    }
    const std::vector<std::string> names = p.fused_from.empty() ? std::vector<std::string>{p.name} : p.fused_from;
    std::size_t found = 0;
    for (const auto& n : names) found += calibrated->codes.count(n);
    if (found == 0) return fallback(p, in_block);
    if (found != names.size()) return nullptr;  // some parts calibrated, some not: built apart
    const Int4Codes& first = calibrated->codes.at(names.front());
    int64_t cols = 0;
    std::visit([&](const auto& m) { cols = m.cols; }, first);
    for (const auto& n : names) {  // fused parts: one layout and width, rows one after another
      const Int4Codes& part = calibrated->codes.at(n);
      if (part.index() != first.index() || std::visit([](const auto& m) { return m.cols; }, part) != cols)
        return nullptr;  // built apart
    }
    std::size_t a8 = 0;
    for (const auto& n : names) a8 += calibrated->int8_activations.count(n);
    if (a8 != 0 && a8 != names.size()) return nullptr;  // activations quantized in some parts only: built apart
    const std::vector<float> bias = calibrated_bias(p, names, *calibrated);
    // The codes move into the Linear: the calibrated model holds them once.
    Int4Codes joined = std::move(calibrated->codes.at(names.front()));
    for (std::size_t i = 1; i < names.size(); ++i) {
      std::visit(
          [&](auto& all) {
            auto& part = std::get<std::decay_t<decltype(all)>>(calibrated->codes.at(names[i]));
            all.rows += part.rows;
            all.blocks.insert(all.blocks.end(), part.blocks.begin(), part.blocks.end());
          },
          joined);
    }
    for (const auto& n : names) calibrated->codes.erase(n);
    const int64_t rows = std::visit([](const auto& m) { return m.rows; }, joined);
    if (!bias.empty() && static_cast<int64_t>(bias.size()) != rows)
      fail("{}: a calibrated bias of {} values for {} rows; expected one a row", p.name, bias.size(), rows);
    return build(std::move(joined), bias.empty() ? nullptr : bias.data(), p.name, a8 != 0);
  };
}

void apply_calibrated_norms(DecoderParams& params, const CalibratedInt4& calibrated) {
  std::size_t applied = 0;
  for (auto& layer : params.layers) {
    for (LayerNormParams* n : {&layer.attn_norm, &layer.mlp_norm}) {
      const auto it = calibrated.norms.find(n->name);
      if (it == calibrated.norms.end()) continue;
      if (it->second.gamma.size() != n->gamma.size() || it->second.beta.size() != n->beta.size())
        fail("{}: a calibrated norm of {} values; expected {}", n->name, it->second.gamma.size(), n->gamma.size());
      *n = it->second;
      ++applied;
    }
  }
  if (applied != calibrated.norms.size())
    fail("calibration changed {} norms and the model has {} of them; expected the model it was calibrated on",
         calibrated.norms.size(), applied);
}

}  // namespace qjoule::model

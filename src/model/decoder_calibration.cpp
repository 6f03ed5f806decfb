#include "qjoule/model/decoder_calibration.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <string_view>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/kernels/linear_weight_only.h"
#include "qjoule/model/decoder_config.h"
#include "qjoule/model/decoder_lm.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/quantization_plan.h"
#include "model/awq_block.h"
#include "model/calibrating_linear.h"
#include "model/calibration_run.h"

namespace qjoule::model {
namespace {

using detail::CalibratingLinear;

// Linear name -> the first Linear reading the same input (Q, K, V; gate, up): who shares whose sums.
void add_input_groups(const DecoderLayerParams& lp, std::map<std::string, std::string>& group_of) {
  for (const auto& group :
       {std::vector<const LinearParams*>{&lp.q, &lp.k, &lp.v}, std::vector<const LinearParams*>{&lp.gate, &lp.up}}) {
    for (const LinearParams* p : group) {
      if (!p->name.empty()) group_of[p->name] = group.front()->name;
    }
  }
}

std::vector<std::string> block_linear_names(const DecoderLayerParams& lp) {
  std::vector<std::string> names;
  for (const LinearParams* p : {&lp.qkv, &lp.q, &lp.k, &lp.v, &lp.o, &lp.gate, &lp.up, &lp.down}) {
    if (!p->name.empty()) names.push_back(p->name);
  }
  return names;
}

// The block's AWQ Linears by role, and its norms as they stand.
detail::AwqBlock awq_roles(const DecoderLayerParams& lp, const std::map<std::string, CalibratingLinear*>& here) {
  const auto awq = [&](const LinearParams& p) -> CalibratingLinear* {
    const auto it = here.find(p.name);
    return it != here.end() && it->second->spec().int4_awq ? it->second : nullptr;
  };
  detail::AwqBlock b;
  if (lp.fused_qkv) {
    b.qkv = awq(lp.qkv);
  } else {
    b.q = awq(lp.q), b.k = awq(lp.k), b.v = awq(lp.v);
  }
  b.gated = lp.gate.out_features > 0;
  b.o = awq(lp.o), b.gate = b.gated ? awq(lp.gate) : nullptr, b.up = awq(lp.up), b.down = awq(lp.down);
  b.attn_norm = lp.attn_norm;
  b.mlp_norm = lp.mlp_norm;
  return b;
}

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

bool policy_needs_calibration(const quant::LayerPolicy& policy) {
  if (quant::needs_calibration(policy.precision_spec())) return true;
  for (const auto& rule : policy.rules()) {
    if (quant::needs_calibration(rule.spec)) return true;
  }
  return false;
}

std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len,
                                                      const std::string& source) {
  if (n <= 0 || len <= 0) fail("{}: {} calibration sequences of {} tokens; expected both positive", source, n, len);
  const int64_t have = static_cast<int64_t>(tokens.size());
  if (have < n * len) {
    fail(
        "{}: {} tokens, too few for {} calibration sequences of {} tokens ({} needed); expected a longer text, or "
        "fewer / shorter sequences (--calib-sequences, --calib-tokens)",
        source, have, n, len, n * len);
  }
  std::vector<std::vector<int32_t>> out;
  for (int64_t s = 0; s < n; ++s) out.emplace_back(tokens.begin() + s * len, tokens.begin() + (s + 1) * len);
  return out;
}

CalibratedInt4 calibrate_decoder(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                                 const std::vector<std::vector<int32_t>>& sequences,
                                 const CalibrationOptions& options) {
  const auto ck = std::make_shared<const io::Checkpoint>(io::Checkpoint::open(dir.string()));
  auto config = load_decoder_config(dir.string(), *ck);
  detail::check_calibration_inputs(dir, config.quantization.has_value(), sequences);
  auto params = load_decoder_params(*ck, config, /*defer_linears=*/true);
  std::function<void(LinearParams&)> load = [ck, inner = std::move(params.load_linear)](LinearParams& p) { inner(p); };
  params.load_linear = nullptr;  // the factory reads what it needs: Q, K, V (and gate, up) built apart
  std::vector<std::vector<std::string>> layer_names;
  const std::vector<DecoderLayerParams> layer_shapes = params.layers;  // names, shapes, norms (weights deferred)
  std::map<std::string, std::string> group_of;
  for (const auto& lp : params.layers) {
    layer_names.push_back(block_linear_names(lp));
    add_input_groups(lp, group_of);
  }
  detail::CalibrationRun run(options);
  const LinearFactory policy_linears = quantized_linear_factory(policy);
  DecoderLM model(std::move(params), [&](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
    const auto decision = policy.resolve(p.name, in_block);
    if (in_block && quant::needs_calibration(decision.spec))
      return run.make_linear(p, decision.spec, group_of.count(p.name) != 0 ? group_of.at(p.name) : p.name, load);
    LinearParams full = p;
    load(full);
    return policy_linears(full, in_block);
  });
  run.linears_built();

  const int64_t hidden = model.config().hidden_size;
  auto states = detail::embedded_states(model, sequences, hidden);  // each sequence's residual stream, block by block
  const int64_t layers = static_cast<int64_t>(layer_names.size());
  for (int64_t i = 0; i < layers; ++i) {
    const auto here = run.find(layer_names[static_cast<std::size_t>(i)]);
    const DecoderLayerParams& shape = layer_shapes[static_cast<std::size_t>(i)];
    run.calibrate_block(
        i, layers, here, shape.down.name, states, hidden,
        [&](float* x, int64_t tokens) { model.forward_layer(i, x, tokens); },
        [&](CalibratedInt4& out) {
          auto awq = awq_roles(shape, here);
          const bool norms_changed = detail::scale_awq_block(awq, quant::AwqOptions{});
          detail::finish_awq_block(awq, norms_changed, /*clip=*/true, quant::AwqOptions{}, out);
          if (norms_changed) model.replace_norms(i, awq.attn_norm, awq.mlp_norm);
        });
  }
  return run.finish(sequences);
}

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

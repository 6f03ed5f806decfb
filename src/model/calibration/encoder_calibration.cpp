#include "qjoule/model/calibration/encoder_calibration.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/quant/precision.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/model/quantization_plan.h"
#include "model/calibration/awq_block.h"
#include "model/calibration/awq_block_trials.h"
#include "model/calibration/awq_classifier_choice.h"
#include "model/calibration/calibration_run.h"

namespace qjoule::model {
namespace {

using detail::CalibratingLinear;

// The block's AWQ Linears by role: Q, K, V; O; FFN-in as "up", FFN-out as "down" (not gated).
detail::AwqBlock awq_roles(const EncoderLayerParams& lp, const std::map<std::string, CalibratingLinear*>& here) {
  const auto awq = [&](const LinearParams& p) -> CalibratingLinear* {
    const auto it = here.find(p.name);
    return it != here.end() && it->second->spec().int4_awq ? it->second : nullptr;
  };
  detail::AwqBlock b;
  b.q = awq(lp.q), b.k = awq(lp.k), b.v = awq(lp.v), b.o = awq(lp.o);
  b.up = awq(lp.ffn_in), b.down = awq(lp.ffn_out);
  b.gated = false;
  b.norms_fold = false;
  return b;
}

// The units AWQ's changes are kept or dropped in (awq_classifier_choice.h): V with O (O's scales live in
// V's rows), FFN-in, FFN-out; a unit holds the AWQ Linears of its roles.
std::vector<std::vector<CalibratingLinear*>> awq_units(const detail::AwqBlock& b) {
  std::vector<std::vector<CalibratingLinear*>> units(3);
  for (CalibratingLinear* l : {b.v, b.o})
    if (l != nullptr) units[0].push_back(l);
  if (b.up != nullptr) units[1].push_back(b.up);
  if (b.down != nullptr) units[2].push_back(b.down);
  return units;
}

// The classifier's logits of one example (all its tokens attended), into out [num_labels].
void example_logits(const EncoderClassifier& m, const std::vector<int32_t>& ids, float* out) {
  const std::vector<int32_t> mask(ids.size(), 1);
  m.forward(ids.data(), mask.data(), 1, static_cast<int64_t>(ids.size()), out);
}

std::vector<std::vector<float>> example_logits(const EncoderClassifier& m,
                                               const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<std::vector<float>> logits;
  for (const auto& s : sequences) {
    logits.emplace_back(static_cast<std::size_t>(m.config().num_labels));
    example_logits(m, s, logits.back().data());
  }
  return logits;
}

// p without its weights (what a CalibratingLinear keeps until its block starts).
LinearParams shape_of(const LinearParams& p) {
  LinearParams shape = p;
  shape.has_bias = with_bias(p);
  free_weights(shape);
  return shape;
}

}  // namespace

CalibratedInt4 calibrate_encoder(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                                 const std::vector<std::vector<int32_t>>& sequences,
                                 const CalibrationOptions& options) {
  const auto ck = io::Checkpoint::open(dir);
  const auto config = load_encoder_config(dir, ck);
  detail::check_calibration_inputs(dir, config.quantization.has_value(), sequences);
  EncoderParams params = load_encoder_params(ck, config);
  // AWQ's changes are chosen by the classifier's logits (awq_classifier_choice.h): the FP32 model's first.
  const bool any_awq = std::any_of(params.layers.begin(), params.layers.end(), [&](const EncoderLayerParams& lp) {
    for (const LinearParams* p : {&lp.q, &lp.k, &lp.v, &lp.o, &lp.ffn_in, &lp.ffn_out})
      if (policy.resolve(p->name, true).spec.int4_awq) return true;
    return false;
  });
  const auto reference =
      any_awq
          ? example_logits(EncoderClassifier(
                               params, quantized_linear_factory(quant::LayerPolicy::uniform(quant::Precision("fp32")))),
                           sequences)
          : std::vector<std::vector<float>>{};
  std::vector<EncoderLayerParams> shapes;  // names and norms; weights dropped
  std::map<std::string, std::string> group_of;
  for (const auto& lp : params.layers) {
    EncoderLayerParams shape;
    shape.q = shape_of(lp.q), shape.k = shape_of(lp.k), shape.v = shape_of(lp.v), shape.o = shape_of(lp.o);
    shape.ffn_in = shape_of(lp.ffn_in), shape.ffn_out = shape_of(lp.ffn_out);
    shapes.push_back(std::move(shape));
    for (const LinearParams* p : {&lp.q, &lp.k, &lp.v}) group_of[p->name] = lp.q.name;
  }
  // A calibrated Linear's FP32 weights wait here until its block starts.
  auto waiting = std::make_shared<std::map<std::string, LinearParams>>();
  const auto load = [waiting](LinearParams& p) {
    auto it = waiting->find(p.name);
    if (it == waiting->end()) fail("{}: its calibration weights were read already", p.name);
    p.weight = std::move(it->second.weight);
    p.bias = std::move(it->second.bias);
    waiting->erase(it);
  };
  detail::CalibrationRun run(options);
  const LinearFactory policy_linears = quantized_linear_factory(policy);
  const auto calibrated = [&](const std::string& name, bool in_block) {
    return in_block && quant::needs_calibration(policy.resolve(name, in_block).spec);
  };
  const EncoderClassifier model(
      std::move(params), [&](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
        for (const auto& part : p.fused_from) {
          if (calibrated(part, in_block)) return nullptr;  // Q, K and V built apart, each calibrated
        }
        if (!p.fused_from.empty() || !calibrated(p.name, in_block)) return policy_linears(p, in_block);
        (*waiting)[p.name] = p;
        return run.make_linear(shape_of(p), policy.resolve(p.name, in_block).spec,
                               group_of.count(p.name) != 0 ? group_of.at(p.name) : p.name, load);
      });
  run.linears_built();

  const int64_t hidden = model.config().hidden_size;
  auto states = detail::embedded_states(model, sequences, hidden);  // each sequence's hidden states, block by block
  const int64_t blocks = model.num_blocks();
  std::vector<std::vector<CalibratingLinear*>> units;  // AWQ's, in block order
  for (int64_t i = 0; i < blocks; ++i) {
    const EncoderLayerParams& shape = shapes[static_cast<std::size_t>(i)];
    const auto here =
        run.find({shape.q.name, shape.k.name, shape.v.name, shape.o.name, shape.ffn_in.name, shape.ffn_out.name});
    run.calibrate_block(
        i, blocks, here, shape.ffn_out.name, states, hidden,
        [&](float* x, int64_t tokens) { model.forward_block(i, x, tokens); },
        [&](CalibratedInt4& out) {
          auto awq = awq_roles(shape, here);
          for (CalibratingLinear* l : {awq.v, awq.o, awq.up, awq.down})
            if (l != nullptr) l->keep_round_to_nearest_alternative();
          for (const auto& unit : awq_units(awq))
            if (!unit.empty()) units.push_back(unit);
          detail::scale_awq_block(awq, quant::AwqOptions{});
          detail::choose_awq_clipping_by_block_output(
              awq, here, states, hidden, [&](float* x, int64_t tokens) { model.forward_block(i, x, tokens); },
              quant::AwqOptions{});
          detail::finish_awq_block(awq, /*norms_changed=*/false, /*clip=*/false, quant::AwqOptions{}, out);
        });
  }
  CalibratedInt4 result = run.finish(sequences);
  if (!units.empty()) {
    const auto started = std::chrono::steady_clock::now();
    const auto choice = detail::keep_awq_where_the_logits_come_closer(
        units, reference, [&](std::size_t i, float* out) { example_logits(model, sequences[i], out); }, result);
    result.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.method += fmt::format(
        " ({} of {} changes kept: mean KL to FP32 on the calibration examples {:.3g}, "
        "round-to-nearest's {:.3g})",
        choice.kept, choice.units, choice.kl, choice.rtn_kl);
    if (options.progress)
      options.progress(fmt::format("AWQ: {} of {} changes kept by the classifier's logits", choice.kept, choice.units));
  }
  return result;
}

}  // namespace qjoule::model

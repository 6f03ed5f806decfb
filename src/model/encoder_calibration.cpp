#include "qjoule/model/encoder_calibration.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/model/encoder_params.h"
#include "qjoule/model/quantization_plan.h"
#include "model/awq_block.h"
#include "model/awq_block_trials.h"
#include "model/calibration_run.h"

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
  for (int64_t i = 0; i < blocks; ++i) {
    const EncoderLayerParams& shape = shapes[static_cast<std::size_t>(i)];
    const auto here =
        run.find({shape.q.name, shape.k.name, shape.v.name, shape.o.name, shape.ffn_in.name, shape.ffn_out.name});
    run.calibrate_block(
        i, blocks, here, shape.ffn_out.name, states, hidden,
        [&](float* x, int64_t tokens) { model.forward_block(i, x, tokens); },
        [&](CalibratedInt4& out) {
          auto awq = awq_roles(shape, here);
          detail::scale_awq_block(awq, quant::AwqOptions{});
          detail::choose_awq_clipping_by_block_output(
              awq, here, states, hidden, [&](float* x, int64_t tokens) { model.forward_block(i, x, tokens); },
              quant::AwqOptions{});
          detail::finish_awq_block(awq, /*norms_changed=*/false, /*clip=*/false, quant::AwqOptions{}, out);
        });
  }
  return run.finish(sequences);
}

}  // namespace qjoule::model

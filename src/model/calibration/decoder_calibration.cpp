#include "qjoule/model/calibration/decoder_calibration.h"

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
#include "model/calibration/awq_block.h"
#include "model/calibration/calibrating_linear.h"
#include "model/calibration/calibration_run.h"

namespace qjoule::model {
namespace {

using detail::CalibratingLinear;

// Linear name -> the first Linear reading the same input (Q, K, V; gate, up; each expert's gate, up): who shares
// whose sums.
void add_input_groups(const DecoderLayerParams& lp, std::map<std::string, std::string>& group_of) {
  std::vector<std::vector<const LinearParams*>> groups = {{&lp.q, &lp.k, &lp.v}, {&lp.gate, &lp.up}};
  for (const ExpertParams& e : lp.experts) groups.push_back({&e.gate, &e.up});
  for (const auto& group : groups) {
    for (const LinearParams* p : group) {
      if (!p->name.empty()) group_of[p->name] = group.front()->name;
    }
  }
}

std::vector<std::string> block_linear_names(const DecoderLayerParams& lp) {
  std::vector<std::string> names;
  for (const LinearParams* p : {&lp.qkv, &lp.q, &lp.k, &lp.v, &lp.o, &lp.gate_up, &lp.gate, &lp.up, &lp.down}) {
    if (!p->name.empty()) names.push_back(p->name);
  }
  for (const ExpertParams& e : lp.experts)
    for (const LinearParams* p : {&e.gate, &e.up, &e.down}) names.push_back(p->name);
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
  b.gate_up_fused = lp.gate_up.out_features > 0;  // Phi-3's gate_up_proj in the role of up
  b.o = awq(lp.o), b.gate = b.gated ? awq(lp.gate) : nullptr, b.down = awq(lp.down);
  b.up = b.gate_up_fused ? awq(lp.gate_up) : awq(lp.up);
  for (const ExpertParams& e : lp.experts) b.experts.push_back({awq(e.gate), awq(e.up), awq(e.down)});
  b.attn_norm = lp.attn_norm;
  b.mlp_norm = lp.mlp_norm;
  return b;
}

bool policy_uses_awq(const quant::LayerPolicy& policy) {
  if (policy.precision_spec().int4_awq) return true;
  for (const auto& rule : policy.rules())
    if (rule.spec.int4_awq) return true;
  return false;
}

}  // namespace

bool policy_needs_calibration(const quant::LayerPolicy& policy) {
  if (quant::needs_calibration(policy.precision_spec())) return true;
  for (const auto& rule : policy.rules()) {
    if (quant::needs_calibration(rule.spec)) return true;
  }
  return false;
}

std::string calibration_file_needed(const std::string& precision) {
  return fmt::format(
      "precision '{}' needs calibration inputs; expected --calib FILE (a language model's: a UTF-8 text, e.g. "
      "WikiText-2's train or valid split; a classifier's: a dataset, e.g. SST-2's train.tsv)",
      precision);
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
  const bool uses_awq = policy_uses_awq(policy);
  const LinearFactory policy_linears = quantized_linear_factory(policy);
  DecoderLM model(std::move(params), [&](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
    const auto decision = policy.resolve(p.name, in_block, p.head_stored);
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
          if (!awq.experts.empty() && uses_awq) {  // the router reads what the experts' gate and up read
            awq.router = shape.router;
            load(awq.router);
          }
          const bool norms_changed = detail::scale_awq_block(awq, quant::AwqOptions{});
          detail::finish_awq_block(awq, norms_changed, /*clip=*/true, quant::AwqOptions{}, out);
          if (norms_changed) model.replace_norms(i, awq.attn_norm, awq.mlp_norm);
          if (awq.router_changed) {
            LinearParams router = awq.router;
            model.replace_router(i, policy_linears(router, false));
          }
        });
  }
  return run.finish(sequences);
}

}  // namespace qjoule::model

#include "qjoule/model/quantization_plan.h"

#include <mutex>

#include "qjoule/error.h"
#include "qjoule/quant/smoothquant.h"

namespace qjoule::model {
namespace {

// An FP32 Linear that also records the per-input-channel abs-max of everything it sees.
class AbsMaxRecordingLinear final : public kernels::Linear {
 public:
  AbsMaxRecordingLinear(std::unique_ptr<kernels::Linear> inner, std::vector<float>& absmax)
      : inner_(std::move(inner)), absmax_(absmax) {}
  void forward(const float* x, int64_t m, float* y) const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quant::accumulate_channel_absmax(x, m, inner_->in_features(), absmax_);
    }
    inner_->forward(x, m, y);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  std::string format() const override { return inner_->format(); }
  std::string kernel_path() const override { return "calibration:" + inner_->kernel_path(); }
  std::size_t bytes_held() const override { return inner_->bytes_held(); }

 private:
  std::unique_ptr<kernels::Linear> inner_;
  std::vector<float>& absmax_;
  mutable std::mutex mutex_;
};

}  // namespace

std::unique_ptr<kernels::Linear> build_prequantized_linear(const LinearParams& p, const quant::LayerDecision& asked) {
  // Built first: the checkpoint's own checks (NaN / Inf scales, code ranges) speak whatever was asked,
  // before a format question could hide them.
  auto linear = p.build_prequantized();
  if (asked.spec != p.prequantized_spec) {
    const std::string own = quant::to_string(p.prequantized_spec);
    throw PrequantizedFormatMismatch(fmt::format(
        "{}: the checkpoint holds this Linear as {} codes, which run as {}; --precision {} asks for another format "
        "(a pre-quantized checkpoint runs in its own: --precision {} or no --precision; for others, quantize the "
        "unquantized model)",
        p.name, p.prequantized_from, own, asked.format, own));
  }
  return linear;
}

std::unique_ptr<kernels::Linear> build_keeping_format_mismatch(const LinearFactory& factory, const LinearParams& p,
                                                               bool in_block,
                                                               std::optional<PrequantizedFormatMismatch>& first) {
  try {
    return factory(p, in_block);
  } catch (const PrequantizedFormatMismatch& e) {
    if (!first) first.emplace(e);
    return p.build_prequantized();
  }
}

LinearFactory quantized_linear_factory(const quant::LayerPolicy& policy, SmoothingFactors smoothing) {
  return [policy, smoothing = std::move(smoothing)](const LinearParams& p,
                                                    bool in_block) -> std::unique_ptr<kernels::Linear> {
    // The policy decides per checkpoint Linear: a fused one is built only when every part gets the same
    // format and the same SmoothQuant factors (or none), so fusing changes nothing but the call count.
    if (p.build_prequantized) return build_prequantized_linear(p, policy.resolve(p.name, in_block, p.head_stored));
    const std::vector<std::string> names = p.fused_from.empty() ? std::vector<std::string>{p.name} : p.fused_from;
    const auto format = policy.resolve(names.front(), in_block, p.head_stored).spec;
    const std::vector<float>* s = nullptr;
    for (size_t i = 0; i < names.size(); ++i) {
      const auto format_i = policy.resolve(names[i], in_block, p.head_stored).spec;
      if (format_i != format) return nullptr;
      const std::vector<float>* si = nullptr;
      if (format.format == quant::Format::int8) {
        auto it = smoothing.find(names[i]);
        if (it != smoothing.end()) si = &it->second;
      }
      if (i == 0) {
        s = si;
      } else if ((s == nullptr) != (si == nullptr) || (s != nullptr && *s != *si)) {
        return nullptr;
      }
    }
    // nf4:dq's absmax scales come in groups of 256 blocks, which would straddle the parts: fused, the
    // parts' numbers would change (as on the GPU: cuda_fuses).
    if (names.size() > 1 && format.format == quant::Format::nf4 && format.nf4_double_quant) return nullptr;
    return kernels::make_linear(format, p.weight.data(), p.bias.empty() ? nullptr : p.bias.data(), p.out_features,
                                p.in_features, p.name, s != nullptr ? s->data() : nullptr);
  };
}

SmoothingFactors calibrate_smoothquant(const EncoderParams& params, float alpha,
                                       const std::function<void(const EncoderClassifier&)>& run_calibration) {
  if (!(alpha >= 0.0f && alpha <= 1.0f)) fail("--smoothquant {} is out of range, expected an alpha in [0, 1]", alpha);
  std::map<std::string, std::vector<float>> act_absmax;
  for (const auto& l : params.layers) {
    for (const auto* lp : {&l.q, &l.k, &l.v, &l.o, &l.ffn_in, &l.ffn_out}) act_absmax[lp->name];
  }
  EncoderParams copy = params;
  const auto fp32 = fp32_linear_factory();
  EncoderClassifier recorder(std::move(copy),
                             [&](const LinearParams& p, bool in_block) -> std::unique_ptr<kernels::Linear> {
                               if (!p.fused_from.empty())
                                 return nullptr;  // Q, K and V record apart, each under its own name
                               auto inner = fp32(p, in_block);
                               auto it = act_absmax.find(p.name);
                               if (it == act_absmax.end()) return inner;
                               return std::make_unique<AbsMaxRecordingLinear>(std::move(inner), it->second);
                             });
  run_calibration(recorder);

  SmoothingFactors out;
  for (const auto& l : params.layers) {
    // Q, K and V see the same input: one s over all three weights.
    std::vector<float> qkv_weight_absmax;
    for (const auto* lp : {&l.q, &l.k, &l.v})
      quant::accumulate_weight_input_absmax(lp->weight.data(), lp->out_features, lp->in_features, qkv_weight_absmax);
    const auto s_qkv = quant::smoothquant_scales(act_absmax[l.q.name], qkv_weight_absmax, alpha);
    out[l.q.name] = out[l.k.name] = out[l.v.name] = s_qkv;
    for (const auto* lp : {&l.o, &l.ffn_in, &l.ffn_out}) {
      std::vector<float> w_absmax;
      quant::accumulate_weight_input_absmax(lp->weight.data(), lp->out_features, lp->in_features, w_absmax);
      out[lp->name] = quant::smoothquant_scales(act_absmax[lp->name], w_absmax, alpha);
    }
  }
  return out;
}

}  // namespace qjoule::model

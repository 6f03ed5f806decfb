// Which format each Linear of a model runs in, and the factory that builds them.
//
// The layer policy (--precision, --quant-include/--quant-exclude, --layer-precision) decides a
// format per Linear; format options (--group-size, --int4-scheme, --double-quant, --emulate) apply to
// every quantized layer. SmoothQuant (--smoothquant ALPHA, int8 only) calibrates per-channel
// activation maxima with the FP32 model on a few examples; its factors s are applied inside the INT8
// layer (activations divided by s when they are quantized, weight columns multiplied by s). They are
// not folded into the preceding LayerNorm: BERT and DistilBERT are post-LN, so that LayerNorm's output
// also feeds the residual path, which folding would change. Q, K and V share one s.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/kernels/make_linear.h"
#include "qjoule/model/encoder_classifier.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

struct QuantizationOptions {
  quant::LayerPolicyOptions policy;   // precision + include/exclude + per-layer rules
  quant::FormatSpec format_defaults;  // group size, int4 scheme, double quant, emulate
  float smoothquant_alpha = -1.0f;    // < 0: off
};

// Per-Linear SmoothQuant factors, by Linear name.
using SmoothingFactors = std::map<std::string, std::vector<float>>;

// The factory for a policy; `smoothing` (may be empty) applies to the int8 layers it names.
// A pre-quantized checkpoint's Linears are built from their codes (build_prequantized_linear).
// Fused Q, K, V params (LinearParams::fused_from) are built as one Linear when the policy gives the three
// the same format and, for int8, the same SmoothQuant factors or none (calibrate_smoothquant gives them
// one shared s); otherwise it returns nullptr and the model builds them apart.
LinearFactory quantized_linear_factory(const quant::LayerPolicy& policy, SmoothingFactors smoothing = {});

// The error of a pre-quantized Linear asked to run in another format than its codes' own. The model
// (DecoderLM) builds every other Linear first, so that a broken tensor (a NaN scale, a code out of
// range) anywhere in the checkpoint is reported before this question of formats; then it throws the
// first of these.
class PrequantizedFormatMismatch : public Error {
 public:
  using Error::Error;
};

// A pre-quantized checkpoint's Linear (LinearParams::build_prequantized; its tensors checked) when
// `asked` (the layer policy's decision for it) is the format its codes run as; else, once those checks
// pass, PrequantizedFormatMismatch: one line naming both formats.
std::unique_ptr<kernels::Linear> build_prequantized_linear(const LinearParams& p, const quant::LayerDecision& asked);

// factory(p, in_block), except that a PrequantizedFormatMismatch is kept in `first` (when it holds none
// yet) and p's own-format Linear is built instead; the model throws `first` once every Linear is built.
std::unique_ptr<kernels::Linear> build_keeping_format_mismatch(const LinearFactory& factory, const LinearParams& p,
                                                               bool in_block,
                                                               std::optional<PrequantizedFormatMismatch>& first);

// Runs `run_calibration(model)` on an FP32 copy of `params` whose Linears record the per-input-channel
// abs-max of their activations, then returns s = max|X|^α / max|W|^(1-α) for every block Linear
// (Q/K/V sharing one s computed over all three weights).
SmoothingFactors calibrate_smoothquant(const EncoderParams& params, float alpha,
                                       const std::function<void(const EncoderClassifier&)>& run_calibration);

}  // namespace qjoule::model

// SmoothQuant (Xiao et al., 2023) for W8A8: migrate quantization difficulty from activations to
// weights with a per-input-channel factor s, using Y = X·Wᵀ = (X·diag(1/s))·(W·diag(s))ᵀ.
//
//   s_j = max|X_j|^α / max|W_j|^(1−α)
//
// max|X_j| comes from calibration (activation abs-max of input channel j over --calib examples);
// max|W_j| is the abs-max of input column j over every linear that reads this input (fused Q/K/V
// share one s, so take the max over all three). α = 0.5 by default, α ∈ [0, 1].
//
// Guards (documented choices):
//   * a channel with max|X_j| = 0 or max|W_j| = 0 carries no information: s_j = 1 (left as is);
//   * s_j is clamped to [kSmoothMin, kSmoothMax] = [1e-5, 1e5], so neither X/s nor W·s can leave
//     FP32's comfortable range or make one side's quantization step collapse (a factor beyond 1e5
//     means the channel is degenerate, e.g. calibration saw almost nothing in it);
//   * NaN/Inf or negative maxima, α outside [0, 1] and length mismatches stop with a clear error.
//
// Applying s, two equivalent ways:
//   (a) fold 1/s into the preceding LayerNorm (γ/s, β/s) and s into the linears' input columns.
//       Only valid when the LayerNorm's output feeds nothing but those linears (pre-LN blocks, as
//       in OPT/LLaMA). In post-LN models such as BERT/DistilBERT the LayerNorm output is ALSO the
//       residual stream (sa_layer_norm's output is both FFN input and residual), so folding would
//       change the model;
//   (b) scale the weights' input columns by s and multiply the activations by 1/s at run time inside
//       the INT8 activation quantizer (make_linear_int8_w8a8 with `smoothing`), which leaves the
//       residual untouched and costs one multiply per activation.
#pragma once

#include <cstdint>
#include <vector>

namespace qjoule::quant {

inline constexpr float kSmoothMin = 1e-5f;
inline constexpr float kSmoothMax = 1e5f;

// running[j] = max(running[j], max_i |x[i, j]|) for x [rows, cols]; `running` is resized to cols
// (filled with 0) when empty. Used to calibrate activation maxima batch by batch.
void accumulate_channel_absmax(const float* x, int64_t rows, int64_t cols, std::vector<float>& running);

// The same over a weight W [out, in] (HF layout): running[k] = max(running[k], max_j |W[j, k]|).
// Call it once per linear that shares the input (Q, K and V) to get their common max|W_k|.
void accumulate_weight_input_absmax(const float* W, int64_t out, int64_t in, std::vector<float>& running);

// s_j for every input channel (guards above).
std::vector<float> smoothquant_scales(const std::vector<float>& act_absmax, const std::vector<float>& weight_absmax,
                                      float alpha);

// (a) LayerNorm fold: gamma[j] /= s[j], beta[j] /= s[j] (beta may be nullptr).
void fold_smoothing_into_layernorm(float* gamma, float* beta, const std::vector<float>& s);

// Weight side, both ways: W[:, j] *= s[j] for W [out, in].
void scale_linear_input_columns(float* W, int64_t out, int64_t in, const std::vector<float>& s);

}  // namespace qjoule::quant

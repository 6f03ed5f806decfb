// AWQ on one decoder block (model/calibration/decoder_calibration.h), after its FP32 pass summed the inputs'
// statistics, as AWQ's reference applies it to a Llama block:
//   - Q, K, V (GPT-2: c_attn) share scales of the attention norm's output, folded into that norm;
//   - O's scales are folded into V's rows (and bias) where V's outputs are O's inputs (no GQA; GPT-2:
//     c_attn's last rows);
//   - gate and up (GPT-2: c_fc) share scales of the MLP norm's output, folded into that norm;
//   - down's scales are folded into up's rows where the block is gated (down reads silu(gate) · up;
//     GPT-2's GELU does not commute with a scale, so its c_proj keeps scale 1).
// A group is scaled only where every Linear reading its input is AWQ's (a scaled norm feeds them all; a
// mixture's FP32 router takes the scales into its columns).
// Then every AWQ Linear but Q and K (whose errors pass through the softmax; AWQ's reference skips them
// too; GPT-2's c_attn holds Q and K) is clipped, and all take round-to-nearest's codes of the result.
#pragma once

#include "model/calibration/calibrating_linear.h"
#include "qjoule/quant/awq.h"

namespace qjoule::model::detail {

// A mixture's expert: its AWQ Linears (nullptr: another precision).
struct AwqExpert {
  CalibratingLinear *gate = nullptr, *up = nullptr, *down = nullptr;
};

// A block's AWQ Linears by role (nullptr: none there, or another precision) and its norms as they stand.
struct AwqBlock {
  CalibratingLinear *qkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  CalibratingLinear *gate = nullptr, *up = nullptr, *down = nullptr;
  bool gated = false;          // SwiGLU (gate in the model, of any precision): down reads silu(gate) · up
  bool gate_up_fused = false;  // Phi-3: `up` is gate_up_proj, rows [gate | up], the norm's only MLP reader
  // Whether scales fold into the norms (pre-LN blocks). A post-LN block's (BERT's) norm output is the
  // residual stream too, so Q/K/V's and FFN-in's inputs keep scale 1 there.
  bool norms_fold = true;
  LayerNormParams attn_norm, mlp_norm;
  // A mixture (experts non-empty): the experts' gate and up read the MLP norm's output, and so does the
  // router (FP32, its weights here): one set of scales for every expert's gate and up, each expert's error on
  // the tokens routed to it, folded into the norm with the router's columns times them (its logits unchanged);
  // each expert's down into its own up's rows.
  std::vector<AwqExpert> experts;
  LinearParams router;
  bool router_changed = false;
};

// Searches the scales and folds them: the Linears' columns times s, what makes their input (b's norms, V's
// or up's rows and bias) divided by s, so the block computes what it did before quantization. Returns
// whether a norm changed (a mixture's router with it).
bool scale_awq_block(AwqBlock& b, const quant::AwqOptions& options);
// Clips (where `clip`: else their weights stand as they are) and quantizes the block's AWQ Linears: their
// codes and biases into `out`, and b's norms (and router) where scale_awq_block changed them.
void finish_awq_block(AwqBlock& b, bool norms_changed, bool clip, const quant::AwqOptions& options,
                      CalibratedInt4& out);

}  // namespace qjoule::model::detail

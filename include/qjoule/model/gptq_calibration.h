// GPTQ calibration of a decoder (Llama, Mistral, Qwen2, GPT-2), one block at a time, as GPTQ's reference
// implementation does: the calibration sequences' hidden states enter block i; the block runs in FP32
// while every Linear whose precision asks for GPTQ (int4:...:gptq) accumulates Σ x xᵀ of its inputs;
// those Linears are quantized (quant/gptq.h) and the block runs again, now quantized, to make block
// i + 1's inputs. The model holds one block's FP32 weights at a time (read from the memory-mapped
// checkpoint when its block starts, dropped once quantized) and the calibration hidden states,
// N × L × hidden FP32 values. Linears of other precisions run as the policy builds them, so the later
// blocks see the inputs the final model gives them.
//
// The result is qjoule's own int4 codes per Linear name; calibrated_linear_factory builds the final
// model from them with the same kernels round-to-nearest runs (q|k|v and gate|up fused as usual).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "qjoule/model/encoder_classifier.h"
#include "qjoule/quant/formats.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

using Int4Codes =
    std::variant<quant::BlockMatrix<quant::BlockInt4Sym<32>>, quant::BlockMatrix<quant::BlockInt4Sym<64>>,
                 quant::BlockMatrix<quant::BlockInt4Sym<128>>, quant::BlockMatrix<quant::BlockInt4Asym<32>>,
                 quant::BlockMatrix<quant::BlockInt4Asym<64>>, quant::BlockMatrix<quant::BlockInt4Asym<128>>>;

struct CalibratedInt4 {
  std::map<std::string, Int4Codes> codes;  // by checkpoint Linear name ("model.layers.0.mlp.up_proj")
  int64_t sequences = 0, tokens_per_sequence = 0;
  double damp = 0.0, seconds = 0.0;
};

struct GptqCalibrationOptions {
  double damp = 0.01;  // quant::GptqOptions::damp
  // Called after each block: "block 3/22 calibrated (7 Linears, GPTQ) in 4.1 s; about 1 min 12 s left".
  std::function<void(const std::string&)> progress;
};

// Whether any Linear of `policy` asks for calibration (its default precision or a --layer-precision rule).
bool policy_needs_calibration(const quant::LayerPolicy& policy);

// The first `n` windows of `len` consecutive tokens of `tokens` (deterministic). Fewer than n · len tokens
// is one line naming `source`, the counts and what to change.
std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len,
                                                      const std::string& source);

// Calibrates the decoder checkpoint `dir` on `sequences` (each at most max_position_embeddings tokens)
// for the Linears `policy` gives a gptq precision. CPU only. NaN or Inf inputs reaching a Linear, or a
// pre-quantized checkpoint, are one line naming the Linear or the checkpoint.
CalibratedInt4 calibrate_gptq(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                              const std::vector<std::vector<int32_t>>& sequences,
                              const GptqCalibrationOptions& options);

// The factory of the calibrated model: a Linear (or fused Q|K|V, gate|up) whose every part has codes is
// built from them (kernels::make_linear_int4_packed); any other from `fallback`.
LinearFactory calibrated_linear_factory(LinearFactory fallback, std::shared_ptr<const CalibratedInt4> calibrated);

}  // namespace qjoule::model

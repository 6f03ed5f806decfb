// Calibration of a decoder (Llama, Mistral, Qwen2, GPT-2) for the int4 Linears whose precision asks for
// it (int4:...:gptq, int4:...:awq), one block at a time, as GPTQ's and AWQ's reference implementations
// do: the calibration sequences' hidden states enter block i; the block runs unquantized (FP32, or its
// products in BF16: CalibrationOptions::bf16_products) while its calibrated Linears sum the statistics of
// their inputs in FP32 (Σ x xᵀ; Σ |x| per channel); those Linears are quantized
// (GPTQ: quant/gptq.h; AWQ: quant/awq.h, the scales folded into the norm or Linear before, awq_block.h)
// and the block runs again, now quantized, to make block i + 1's inputs. The model holds one block's
// FP32 weights at a time (read from the memory-mapped checkpoint when its block starts, dropped once
// quantized) and the calibration hidden states, N × L × hidden FP32 values. Linears of other precisions
// run as the policy builds them, so the later blocks see the inputs the final model gives them.
//
// The result is qjoule's own int4 codes per Linear name (and, for AWQ, the norms and biases its scales
// changed); calibrated_linear_factory and load_decoder build the final model from them with the same
// kernels round-to-nearest runs (q|k|v and gate|up fused as usual).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/quant/layer_policy.h"

namespace qjoule::model {

struct CalibrationOptions {
  double damp = 0.01;  // quant::GptqOptions::damp
  // The recording pass (each block's unquantized run, whose Linear inputs the statistics sum) with its
  // products in BF16 (oneDNN's BF16 matmul, FP32 accumulation) instead of FP32: the caller sets it where
  // BF16 products run faster on this machine (bench::calibration_bf16_products). The sums, the searches,
  // GPTQ and the quantized pass stay as they are.
  bool bf16_products = false;
  // Called after each block: "block 3/22 calibrated (7 Linears, GPTQ) in 4.1 s; about 1 min 12 s left".
  std::function<void(const std::string&)> progress;
};

// Whether any Linear of `policy` asks for calibration (its default precision or a --layer-precision rule).
bool policy_needs_calibration(const quant::LayerPolicy& policy);

// What a calibrated precision without --calib says: "precision 'int4:awq' needs calibration inputs;
// expected --calib FILE (...)".
std::string calibration_file_needed(const std::string& precision);

// The first `n` windows of `len` consecutive tokens of `tokens` (deterministic). Fewer than n · len tokens
// is one line naming `source`, the counts and what to change.
std::vector<std::vector<int32_t>> calibration_windows(const std::vector<int32_t>& tokens, int64_t n, int64_t len,
                                                      const std::string& source);

// Calibrates the decoder checkpoint `dir` on `sequences` (each at most max_position_embeddings tokens)
// for the Linears `policy` gives a gptq or awq precision. CPU only. NaN or Inf inputs reaching a Linear, or a
// pre-quantized checkpoint, are one line naming the Linear or the checkpoint.
CalibratedInt4 calibrate_decoder(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                                 const std::vector<std::vector<int32_t>>& sequences, const CalibrationOptions& options);

}  // namespace qjoule::model

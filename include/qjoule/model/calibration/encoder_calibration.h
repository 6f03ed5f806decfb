// Calibration of a BERT or DistilBERT classifier for the int4 Linears whose precision asks for it
// (int4:...:gptq, int4:...:awq), one block at a time as decoder_calibration.h does: each calibration
// sequence (one example's tokens, [CLS] … [SEP], unpadded) enters block i, the block runs unquantized while its
// calibrated Linears sum their inputs' statistics, those Linears are quantized and the quantized block
// makes block i + 1's inputs.
//
// AWQ on these post-LayerNorm blocks: a norm's output is the block's residual stream as well as Q/K/V's
// (or FFN-in's) input, so no scale can be folded into it and those Linears keep scale 1; O's scales are
// folded into V's rows and bias; FFN-out reads GELU's output, which does not commute with a scale. V, O,
// FFN-in and FFN-out are clipped where that brings the block's output closer to the unquantized block's
// (model/calibration/awq_block_trials.h; Q and K never, as in decoders). Once every block is calibrated, each block's
// AWQ changes (V with O, FFN-in, FFN-out) are kept only where the classifier's logits on the calibration
// examples come closer to the FP32 model's (model/calibration/awq_classifier_choice.h; the FP32 model runs once first,
// beside the loaded parameters); `method` says how many were kept. The result is the same CalibratedInt4 as
// a decoder's (no norm changes), built into the model by calibrated_linear_factory.
#pragma once

#include <filesystem>
#include <vector>

#include "qjoule/model/calibration/decoder_calibration.h"

namespace qjoule::model {

// Calibrates the encoder checkpoint `dir` on `sequences` (token ids, each at most max_position_embeddings)
// for the Linears `policy` gives a gptq or awq precision. CPU only. NaN or Inf inputs reaching a Linear, or
// a pre-quantized checkpoint, are one line naming the Linear or the checkpoint.
CalibratedInt4 calibrate_encoder(const std::filesystem::path& dir, const quant::LayerPolicy& policy,
                                 const std::vector<std::vector<int32_t>>& sequences, const CalibrationOptions& options);

}  // namespace qjoule::model

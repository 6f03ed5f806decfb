// `qjoule export`: an unquantized Hugging Face decoder (Llama family) or encoder classifier (BERT,
// DistilBERT) written in the layout its precision maps to, so
// that what qjoule measured can be run by another runtime, and read back by qjoule bit for bit.
//
//   int4:g=G[:sym|:asym]  GPTQ (model/prequantized/prequantized_linear.h): checkpoint_format gptq_v2 (zeros as is),
//                         desc_act false, g_idx in order; the codes, FP16 scales and zeros are those of
//                         qjoule's own int4 quantizer (a sym block's zero is 8)
//   nf4, nf4:dq           bitsandbytes 4-bit (model/prequantized/bnb_nf4_linear.h), with and without double quant
//   fp16, bf16            plain safetensors, every floating-point tensor converted (round to nearest even)
//
// The transformer-block Linears (q/k/v/o_proj, gate/up/down_proj; a BERT / DistilBERT layer's) are
// quantized, one at a time; every other tensor (embeddings, norms, lm_head, a classifier's pooler and
// head) is copied as stored for the 4-bit layouts. config.json gets
// the layout's quantization_config (or torch_dtype); tokenizer and generation files are copied. Memory:
// the output's quantized bytes plus one Linear in FP32 (the source is mapped, its pages released).
// A spec with no layout, GPT-2 or an unknown model for a 4-bit layout, a checkpoint that is already quantized,
// shapes a layout cannot hold, or an output folder that is not empty: one line, before anything is written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "qjoule/model/calibrated_int4.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model {

struct ExportSummary {
  std::string layout;     // "GPTQ (gptq_v2, group_size 128, asym)", "bitsandbytes nf4", "safetensors fp16"
  int64_t quantized = 0;  // Linears quantized
  int64_t copied = 0;     // tensors copied (or converted, fp16 / bf16)
  uint64_t bytes = 0;     // model.safetensors' size
};

// The specs export writes, for --help and for the refusal.
inline constexpr const char* kExportableSpecs = "int4:g=32|64|128[:sym|:asym], nf4, nf4:dq, fp16, bf16";

// Writes `model` as `spec` into `out` (created; must not hold files). `progress(done, total, tensor)`
// after each tensor. A calibrated spec (int4:...:gptq, int4:...:awq) writes `calibrated`'s codes (from
// calibrate_decoder on this model) as GPTQ, and the biases and norms its AWQ scales changed, as F32.
ExportSummary export_checkpoint(const std::filesystem::path& model, const quant::FormatSpec& spec,
                                const std::filesystem::path& out,
                                const std::function<void(int64_t, int64_t, const std::string&)>& progress = {},
                                const CalibratedInt4* calibrated = nullptr);

}  // namespace qjoule::model

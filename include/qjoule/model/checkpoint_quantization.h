// What a Hugging Face checkpoint says about being quantized already: config.json's
// `quantization_config` (GPTQ, AWQ, bitsandbytes 4-bit), read and checked field by field, and the
// packed tensors such checkpoints hold (`*.qweight`, `*.weight.absmax`, ...).
//
// qjoule reads FP32, FP16 and BF16 safetensors and quantizes them itself (--precision). Reading the
// codes of a pre-quantized checkpoint is not implemented yet: such a checkpoint is refused before
// anything is loaded, in one line naming its method, bits and layout and saying what qjoule reads,
// instead of the misleading "tensor '...weight' is missing" or a shape error about its packed tensors.
// A `quantization_config` that is itself broken (an unknown quant_method, bits 3, a field of the wrong
// type, bitsandbytes fp4) says so in one line, naming the field, what was found and what is expected.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "qjoule/io/safetensors.h"

namespace qjoule::model {

struct CheckpointQuantization {
  std::string method;  // "gptq", "awq", "bitsandbytes"
  int bits = 4;
  int group_size = 0;             // gptq / awq; -1 = one group per row; 0 = none (bitsandbytes)
  bool sym = true;                // gptq
  bool desc_act = false;          // gptq: act-order (g_idx)
  std::string checkpoint_format;  // gptq: "gptq" (zeros stored − 1) or "gptq_v2"; awq: its "version"
  std::string bnb_quant_type;     // bitsandbytes: "nf4" or "fp4"
  bool bnb_double_quant = false;  // bitsandbytes: bnb_4bit_use_double_quant

  // "gptq 4-bit, group_size 128, sym, desc_act false, gptq_v2 zeros" and the like.
  std::string describe() const;
};

// The checkpoint's quantization from its parsed config.json (`where` names the file): nullopt when it
// has no `quantization_config` (nor bitsandbytes' top-level load_in_4bit). A broken one fails in one
// line naming the field.
std::optional<CheckpointQuantization> read_checkpoint_quantization(const nlohmann::json& config,
                                                                   const std::string& where);

// Fails, in one line, for a pre-quantized checkpoint: one whose config.json has a quantization_config,
// or whose tensors are packed (a `.qweight`, `.weight.absmax` or `.weight.quant_state.*` tensor) without
// one. Called before a model's shapes are read from its tensors.
void refuse_prequantized_checkpoint(const std::filesystem::path& dir, const nlohmann::json& config,
                                    const io::Checkpoint& checkpoint);

}  // namespace qjoule::model

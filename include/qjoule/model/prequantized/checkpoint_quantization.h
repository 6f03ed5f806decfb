// What a Hugging Face checkpoint says about being quantized already: config.json's
// `quantization_config` (GPTQ, AWQ, bitsandbytes 4-bit), read and checked field by field, and the
// packed tensors such checkpoints hold (`*.qweight`, `*.weight.absmax`, ...).
//
// GPTQ (4-bit, act-order too), AWQ (gemm) and bitsandbytes NF4 checkpoints of Llama-family decoders are
// read: their codes run on qjoule's int4 and nf4 kernels (model/prequantized/prequantized_linear.h,
// model/prequantized/bnb_nf4_linear.h). Every other pre-quantized checkpoint (bitsandbytes fp4 or 8-bit, GPTQ 8-bit,
// encoders, GPT-2) is refused before anything is loaded, in one line
// naming its method, bits and layout and saying what qjoule reads, instead of the misleading "tensor
// '...weight' is missing" or a shape error about its packed tensors.
// A `quantization_config` that is itself broken (an unknown quant_method, bits 3, a field of the wrong
// type, bitsandbytes fp4) says so in one line, naming the field, what was found and what is expected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

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

// The quantization that `dir`/config.json states (read as the loaders read it: a malformed file is one
// line naming it); nullopt when it states none, or when `dir` holds no config.json (a GGUF file, a folder
// that is not a model: its loader says what is wrong).
std::optional<CheckpointQuantization> checkpoint_quantization_of(const std::filesystem::path& dir);

// The checkpoint's quantization when qjoule reads its codes (model/prequantized/prequantized_linear.h), nullopt for
// an unquantized checkpoint, one line for anything else: a method, bit width, group size or act-order
// it does not read, or (`reads_prequantized` false: encoders, GPT-2) any pre-quantized checkpoint
// of `family`; and a packed `.qweight`, `.weight.absmax` or `.weight.quant_state.*` tensor in a
// checkpoint whose config.json has no quantization_config. Called before a model's shapes are read
// from its tensors.
std::optional<CheckpointQuantization> readable_checkpoint_quantization(const std::filesystem::path& dir,
                                                                       const nlohmann::json& config,
                                                                       const io::Checkpoint& checkpoint,
                                                                       bool reads_prequantized,
                                                                       const std::string& family);

// Linear `name`'s packed tensor `tensor_name` (NAME.qweight, ...): one line when it is missing, or not
// a 2-D tensor of `dtype`.
const io::TensorView& packed_tensor(const io::Checkpoint& checkpoint, const CheckpointQuantization& quantization,
                                    const std::string& tensor_name, io::DType dtype);

// Whether Linear `name` is packed in the checkpoint (NAME.qweight, or a bitsandbytes quant state): a
// pre-quantized checkpoint may keep some Linears unquantized (a classifier head, lm_head).
bool is_prequantized_linear(const io::Checkpoint& checkpoint, const std::string& name);

// The (out_features, in_features) of Linear `name` as its packed tensors give them (GPTQ's qweight
// [in / 8, out], AWQ's [in, out / 8], bitsandbytes' quant state's shape).
std::pair<int64_t, int64_t> prequantized_linear_dims(const io::Checkpoint& checkpoint,
                                                     const CheckpointQuantization& quantization,
                                                     const std::string& name);

}  // namespace qjoule::model

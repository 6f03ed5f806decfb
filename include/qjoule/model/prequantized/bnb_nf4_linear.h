// The Linears of a bitsandbytes 4-bit checkpoint (transformers' `load_in_4bit` models saved with
// save_pretrained; model/prequantized/checkpoint_quantization.h reads its config), read into qjoule's nf4 and
// nf4:dq blocks (quant/formats.h) without passing through FP32.
//
// bitsandbytes' serialization of Linear NAME of [out, in] (Params4bit + QuantState.as_dict(packed=True)):
//   NAME.weight        U8 [out·in / 2, 1]  the codes of the flattened row-major weight, two per byte, the
//                      first element in the high nibble (qjoule's nibble order)
//   NAME.weight.absmax F32 [blocks]: each block of `blocksize` consecutive weights' absmax; with double
//                      quantization U8 [blocks], codes of the signed dynamic map, decoded
//                      nested_quant_map[code] · nested_absmax[b / nested_blocksize] + nested_offset
//   NAME.weight.quant_map         F32 [16]: the NF4 table
//   NAME.weight.nested_absmax     F32 [ceil(blocks / nested_blocksize)]   (double quantization only)
//   NAME.weight.nested_quant_map  F32 [256]: the signed dynamic map        (double quantization only)
//   NAME.weight.quant_state.bitsandbytes__nf4  U8 [bytes]: a JSON object {"quant_type": "nf4",
//                      "blocksize": 64, "dtype": "float16", "shape": [out, in], and with double
//                      quantization "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": m}
//   NAME.bias          (optional)
// This is qjoule's nf4 (BlockNf4: absmax, 32 code bytes) and nf4:dq (BlockNf4Dq, absmax_scales =
// nested_absmax, absmax_mean = nested_offset) exactly when blocksize is 64, nested_blocksize 256, the
// tables are kNf4Table and dynamic_map_signed() bit for bit, and in is a multiple of 64 (so that no
// block straddles two rows). Anything else is refused in one line naming the tensor or field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/model/prequantized/bnb_quant_state.h"

namespace qjoule::model {

// Checks Linear `name`'s tensors against [out, in] and the config's double quantization (`double_quant`):
// shapes, dtypes, blocksize 64, nested blocksize 256, the tables. One line naming the tensor or field.
void check_bnb_nf4_linear(const io::Checkpoint& checkpoint, const std::string& name, int64_t out, int64_t in,
                          bool double_quant);

// Reads, checks (finite and non-negative absmax, finite nested scales and offset) and repacks Linear
// `name` into an nf4 or nf4:dq Linear with `bias` (FP32 [out], or empty). Each tensor's mapped pages
// are released once read.
std::unique_ptr<kernels::Linear> load_bnb_nf4_linear(const io::Checkpoint& checkpoint, const std::string& name,
                                                     int64_t out, int64_t in, bool double_quant,
                                                     const std::vector<float>& bias);

}  // namespace qjoule::model

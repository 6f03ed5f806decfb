// bitsandbytes' quant state of a 4-bit Linear (model/prequantized/bnb_nf4_linear.h has the whole layout): the JSON
// that QuantState.as_dict(packed=True) stores as the U8 tensor NAME.weight.quant_state.bitsandbytes__nf4,
// read and checked field by field. Kept apart from the Linear so that the fuzz target reads it alone.
#pragma once

#include <cstdint>
#include <string>

#include "qjoule/io/safetensors.h"

namespace qjoule::model {

// NAME.weight.quant_state.bitsandbytes__<type>'s JSON, checked.
struct BnbQuantState {
  std::string quant_type;  // "nf4"
  int64_t blocksize = 0;
  std::string dtype;  // the compute dtype the model was loaded with ("float16", "bfloat16")
  int64_t out = 0, in = 0;
  bool nested = false;  // double quantization
  int64_t nested_blocksize = 0;
  float nested_offset = 0.0f;
};

// The quant-state tensor's name for Linear `name` (bitsandbytes__nf4), or "" when it has none.
std::string bnb_quant_state_tensor(const io::Checkpoint& checkpoint, const std::string& name);

// Linear `name`'s quant state: one line when the tensor is missing (a Linear left unquantized, as
// llm_int8_skip_modules does), not U8 JSON, fp4, or a field is absent or of the wrong type.
BnbQuantState read_bnb_quant_state(const io::Checkpoint& checkpoint, const std::string& name);

}  // namespace qjoule::model

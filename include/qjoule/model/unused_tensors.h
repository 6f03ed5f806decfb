// After a model is built from a checkpoint: the tensors it did not read, as one warning line, so that
// a checkpoint whose tensors are misnamed (or hold parts qjoule does not run) never passes silently.
#pragma once

#include <string>

#include "qjoule/io/safetensors.h"

namespace qjoule::model {

// "" when the model read every tensor but the buffers Hugging Face checkpoints carry and no model
// needs (GPT-2's attn.bias / attn.masked_bias masks, rotary_emb.inv_freq, position_ids); otherwise
// "<checkpoint>: N tensors are not used by the model: a, b, c (and M more)".
std::string unused_tensors_warning(const io::Checkpoint& checkpoint);

}  // namespace qjoule::model

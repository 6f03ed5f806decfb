// The mixture-of-experts fields of a decoder's config.json (Mixtral, Qwen3-MoE, OLMoE), reconciled with the
// checkpoint's router and expert tensors (decoder_config.cpp reads the rest of the config).
#pragma once

#include <nlohmann/json.hpp>

#include "config_reconciler.h"
#include "qjoule/model/decoder_config.h"

namespace qjoule::model {

bool is_moe_arch(DecoderArch arch);

// Fills out.moe and out.intermediate_size (the dense layers' MLP width, where the model has dense layers; else
// the experts') from `config` and the tensors under out.prefix: the expert count from num_local_experts /
// num_experts and the router's rows, top-k from num_experts_per_tok, the experts' width from their gate
// projections, which layers are sparse. A field that disagrees with the tensors, a top-k outside 1 ..
// experts, or a field qjoule does not run (OLMoE's clip_qkv) is one line naming it.
void read_moe_fields(ConfigReconciler& r, const nlohmann::json& config, const io::Checkpoint& ck, DecoderConfig& out);

}  // namespace qjoule::model

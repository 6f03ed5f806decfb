// The RoPE fields of a decoder's config.json: rope_theta and rope_scaling at the top (the Hub's checkpoints,
// transformers 4) or in rope_parameters (transformers 5), split by layer type or not (Gemma 3), and the
// partial rotary factor.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "config_reconciler.h"
#include "qjoule/kernels/decoder_ops.h"

namespace qjoule::model {

// rope_parameters, nullptr when config.json has none; not an object is one line.
const nlohmann::json* rope_parameters(const ConfigReconciler& r, const nlohmann::json& config);
// rope_theta from the top of config.json or from rope_parameters; both, and different, is one line.
double read_rope_theta(const ConfigReconciler& r, const nlohmann::json& config, double fallback);
// rope_scaling (or rope_parameters) as kernels::RopeScaling; phi3: Phi3Config's older names for longrope.
kernels::RopeScaling read_rope_scaling(const ConfigReconciler& r, const nlohmann::json& config, int64_t max_positions,
                                       bool phi3 = false);
// partial_rotary_factor at the top of config.json or in rope_parameters; 1 when absent.
double partial_rotary_factor(const ConfigReconciler& r, const nlohmann::json& config);
// Whether rope_parameters is split by layer type ({"full_attention": {...}, "sliding_attention": {...}}).
bool rope_split_by_layer_type(const nlohmann::json& config);
// One layer type's rope_parameters as a config of its own; the config itself when not split.
nlohmann::json rope_config_of(const nlohmann::json& config, const char* layer_type);

}  // namespace qjoule::model

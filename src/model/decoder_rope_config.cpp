#include "decoder_rope_config.h"

#include <fmt/format.h>

#include "qjoule/error.h"

namespace qjoule::model {

using json = nlohmann::json;

// transformers 5 writes RoPE's theta and scaling in one object, rope_parameters ({"rope_type": "default",
// "rope_theta": 1e6, ...}); the Hub's checkpoints (transformers 4) write rope_theta and rope_scaling at the
// top. Either is read; nullptr when config.json has no rope_parameters.
const json* rope_parameters(const ConfigReconciler& r, const json& config) {
  const auto it = config.find("rope_parameters");
  if (it == config.end() || it->is_null()) return nullptr;
  if (!it->is_object()) fail("{}: rope_parameters is {}, expected an object or null", r.path(), it->dump());
  return &*it;
}

// rope_theta from the top of config.json or from rope_parameters; both, and different, is one line.
double read_rope_theta(const ConfigReconciler& r, const json& config, double fallback) {
  const double top = r.positive_number_field("rope_theta", fallback);
  const json* params = rope_parameters(r, config);
  if (params == nullptr || !params->contains("rope_theta") || (*params)["rope_theta"].is_null()) return top;
  const json& theta = (*params)["rope_theta"];
  if (!theta.is_number() || !(theta.get<double>() > 0.0))
    fail("{}: rope_parameters.rope_theta = {}, expected a positive number", r.path(), theta.dump());
  if (config.contains("rope_theta") && !config["rope_theta"].is_null() && top != theta.get<double>())
    fail("{}: rope_theta = {} and rope_parameters.rope_theta = {}; expected one value", r.path(), top,
         theta.get<double>());
  return theta.get<double>();
}

kernels::RopeScaling read_rope_scaling(const ConfigReconciler& r, const json& config, int64_t max_positions,
                                       bool phi3) {
  kernels::RopeScaling s;
  auto it = config.find("rope_scaling");
  const char* field = "rope_scaling";
  if (it == config.end() || it->is_null()) {
    const json* params = rope_parameters(r, config);
    if (params == nullptr) return s;
    it = config.find("rope_parameters");
    field = "rope_parameters";
  }
  if (!it->is_object()) fail("{}: {} is {}, expected an object or null", r.path(), field, it->dump());
  const json& rs = *it;
  const std::string where = r.path() + ": " + field + ".";
  s.type = string_field(rs, "rope_type", string_field(rs, "type", "default", where), where);
  auto number = [&](const char* key, double fallback) {
    auto f = rs.find(key);
    if (f == rs.end() || f->is_null()) return fallback;
    if (!f->is_number()) fail("{}: {}.{} is {}, expected a number", r.path(), field, key, f->dump());
    return f->get<double>();
  };
  s.factor = number("factor", 1.0);
  s.low_freq_factor = number("low_freq_factor", 1.0);
  s.high_freq_factor = number("high_freq_factor", 4.0);
  s.original_max_position_embeddings =
      static_cast<int64_t>(number("original_max_position_embeddings", static_cast<double>(max_positions)));
  s.beta_fast = number("beta_fast", 32.0);
  s.beta_slow = number("beta_slow", 1.0);
  s.attention_factor = number("attention_factor", 0.0);
  if (phi3 && (s.type == "su" || s.type == "yarn")) s.type = "longrope";  // Phi3Config's older names for it
  if (s.type == "longrope") {
    // Phi-3: original_max_position_embeddings may sit at the top of config.json; factor, when absent, is
    // the ratio of the positions (transformers' _compute_longrope_parameters).
    if (!rs.contains("original_max_position_embeddings"))
      s.original_max_position_embeddings = r.int_field("original_max_position_embeddings").value_or(max_positions);
    if (!rs.contains("factor") || rs["factor"].is_null())
      s.factor = static_cast<double>(max_positions) / static_cast<double>(s.original_max_position_embeddings);
    for (auto [key, values] : {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
      const auto f = rs.find(key);
      if (f == rs.end() || !f->is_array())
        fail("{}: {}.{} is {}, expected a list of numbers (type longrope)", r.path(), field, key,
             f == rs.end() ? "missing" : f->dump().substr(0, 80));
      for (const json& v : *f) {
        if (!v.is_number()) fail("{}: {}.{} holds {}, expected numbers", r.path(), field, key, v.dump());
        values->push_back(v.get<double>());
      }
    }
  }
  if (s.type != "default" && s.type != "linear" && s.type != "llama3" && s.type != "yarn" && s.type != "longrope")
    fail("{}: {} type '{}' is not supported; supported: linear, llama3, yarn, longrope (none: default)", r.path(),
         field, s.type);
  return s;
}

// partial_rotary_factor (Phi-3, Phi-4-mini) at the top of config.json or in rope_parameters; 1 when absent.
double partial_rotary_factor(const ConfigReconciler& r, const json& config) {
  const json* params = rope_parameters(r, config);
  if (params != nullptr && params->contains("partial_rotary_factor") && !(*params)["partial_rotary_factor"].is_null()) {
    const json& f = (*params)["partial_rotary_factor"];
    if (!f.is_number() || !(f.get<double>() > 0.0) || f.get<double>() > 1.0)
      fail("{}: rope_parameters.partial_rotary_factor = {}, expected a number in (0, 1]", r.path(), f.dump());
    return f.get<double>();
  }
  const double f = r.positive_number_field("partial_rotary_factor", 1.0);
  if (f > 1.0) fail("{}: partial_rotary_factor = {}, expected a number in (0, 1]", r.path(), f);
  return f;
}

// Whether rope_parameters is split by layer type, as transformers 5 writes Gemma 3's ({"full_attention":
// {...}, "sliding_attention": {...}}).
bool rope_split_by_layer_type(const json& config) {
  const auto it = config.find("rope_parameters");
  return it != config.end() && it->is_object() && (it->contains("full_attention") || it->contains("sliding_attention"));
}

// One layer type's rope_parameters as a config of its own that read_rope_theta / read_rope_scaling read;
// the config itself when rope_parameters is not split.
json rope_config_of(const json& config, const char* layer_type) {
  if (!rope_split_by_layer_type(config)) return config;
  json sub = json::object();
  if (config["rope_parameters"].contains(layer_type)) sub["rope_parameters"] = config["rope_parameters"][layer_type];
  return sub;
}

}  // namespace qjoule::model

#include "decoder_moe_config.h"

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"

namespace qjoule::model {
namespace {

using json = nlohmann::json;

// Which layers hold the mixture: Qwen3-MoE's decoder_sparse_step and mlp_only_layers; every layer elsewhere.
std::vector<bool> sparse_layers(const ConfigReconciler& r, const json& config, const DecoderConfig& out,
                                int64_t layers) {
  std::vector<bool> sparse(static_cast<std::size_t>(layers), true);
  if (out.arch != DecoderArch::Qwen3Moe) return sparse;
  const int64_t step = r.int_field("decoder_sparse_step").value_or(1);
  if (step <= 0) fail("{}: decoder_sparse_step = {}, expected a positive number", r.path(), step);
  for (int64_t i = 0; i < layers; ++i) sparse[static_cast<std::size_t>(i)] = (i + 1) % step == 0;
  const auto it = config.find("mlp_only_layers");
  if (it == config.end() || it->is_null()) return sparse;
  if (!it->is_array()) fail("{}: mlp_only_layers = {}, expected a list of layer indices", r.path(), it->dump());
  for (const json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= layers)
      fail("{}: mlp_only_layers holds {}, expected layer indices 0 to {}", r.path(), v.dump(), layers - 1);
    sparse[v.get<std::size_t>()] = false;
  }
  return sparse;
}

}  // namespace

bool is_moe_arch(DecoderArch arch) {
  return arch == DecoderArch::Mixtral || arch == DecoderArch::Qwen3Moe || arch == DecoderArch::Olmoe;
}

void read_moe_fields(ConfigReconciler& r, const json& config, const io::Checkpoint& ck, DecoderConfig& out) {
  MoeConfig& moe = out.moe;
  const std::string layers_prefix = out.prefix + "layers.";
  const int64_t layers = count_layers(ck, layers_prefix);
  moe.sparse_layer = sparse_layers(r, config, out, layers);
  int64_t first_sparse = -1, first_dense = -1;
  for (int64_t i = layers - 1; i >= 0; --i)
    (moe.sparse_layer[static_cast<std::size_t>(i)] ? first_sparse : first_dense) = i;
  if (first_sparse < 0)
    fail("{}: no layer of {} is a mixture of experts (mlp_only_layers / decoder_sparse_step leave none)", r.path(),
         layers);
  const std::string block = fmt::format("{}{}.{}", layers_prefix, first_sparse, out.moe_block());

  // The expert count: config.json (num_local_experts: Mixtral, and transformers 5's Qwen3-MoE; num_experts:
  // the Hub's Qwen3-MoE and OLMoE) against the router's rows.
  const auto local = r.int_field("num_local_experts"), named = r.int_field("num_experts");
  if (local && named && *local != *named)
    fail("{}: num_local_experts = {} and num_experts = {}; expected one expert count", r.path(), *local, *named);
  const char* field = local ? "num_local_experts" : "num_experts";
  moe.num_experts = r.reconcile(field, block + "gate.weight", 0);
  if (moe.num_experts <= 0)
    fail("{}: {} = {}, expected a positive number of experts", r.path(), field, moe.num_experts);
  const int64_t stored = count_layers(ck, block + "experts.");
  if (stored != moe.num_experts)
    fail("{}: {} = {}, but the checkpoint holds tensors for {} experts under '{}experts.'", r.path(), field,
         moe.num_experts, stored, block);

  const int64_t top_k_default = out.arch == DecoderArch::Mixtral ? 2 : 8;
  moe.experts_per_token = r.int_field("num_experts_per_tok").value_or(top_k_default);
  if (!config.contains("num_experts_per_tok"))
    out.inferred_fields.push_back(fmt::format("num_experts_per_tok (Hugging Face default {})", top_k_default));
  if (moe.experts_per_token <= 0 || moe.experts_per_token > moe.num_experts)
    fail("{}: num_experts_per_tok = {}, expected 1 to the {} experts", r.path(), moe.experts_per_token,
         moe.num_experts);
  moe.normalize_top_k =
      out.arch == DecoderArch::Mixtral || bool_field(config, "norm_topk_prob", false, r.path() + ": ");

  // The experts' width, from expert 0's gate projection (a pre-quantized one's packed tensors); Qwen3-MoE's dense
  // layers have their own.
  const auto rows_of = [&](const char* width_field, const std::string& linear) {
    const int64_t rows = out.quantization ? prequantized_linear_dims(ck, *out.quantization, linear).first
                                          : r.tensor(linear + ".weight").shape.at(0);
    return r.reconcile_value(width_field, rows, fmt::format("the rows of '{}'", linear));
  };
  const bool own_width = out.arch == DecoderArch::Qwen3Moe;
  moe.expert_intermediate_size = rows_of(own_width ? "moe_intermediate_size" : "intermediate_size",
                                         block + (out.moe_mixtral_names() ? "experts.0.w1" : "experts.0.gate_proj"));
  if (!own_width) {
    out.intermediate_size = moe.expert_intermediate_size;
  } else if (first_dense >= 0) {
    out.intermediate_size = rows_of("intermediate_size", fmt::format("{}{}.mlp.gate_proj", layers_prefix, first_dense));
  } else {
    out.intermediate_size = r.int_field("intermediate_size").value_or(moe.expert_intermediate_size);
  }
  if (out.arch == DecoderArch::Olmoe) {
    if (const auto it = config.find("clip_qkv"); it != config.end() && !it->is_null())
      fail("{}: clip_qkv = {} is not supported; expected null (as OLMoE publishes it)", r.path(), it->dump());
  }
}

}  // namespace qjoule::model

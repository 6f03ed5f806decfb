// DecoderLM's reports: each Linear's format, kernel path and bytes, and the model's bytes as held and in FP32.
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {

std::vector<LinearReport> DecoderLM::linear_reports() const {
  std::vector<LinearReport> out;
  for (const auto& l : all_linears_)
    out.push_back(
        {l.name, l.linear->format(), l.linear->kernel_path(), l.linear->bytes_held(), l.fp32_bytes, l.token_share});
  return out;
}

LinearReport DecoderLM::head_report() const {
  const kernels::Linear& l = *lm_head_.linear;
  const auto fp32 = static_cast<std::size_t>(l.out_features() * l.in_features()) * sizeof(float);
  return {lm_head_.name, l.format(), l.kernel_path(), l.bytes_held(), fp32};
}

std::map<std::string, int> DecoderLM::kernel_path_counts() const {
  std::map<std::string, int> counts;
  for (const auto& l : all_linears_) counts[l.linear->format() + " " + l.linear->kernel_path()] += l.parts;
  return counts;
}

std::size_t DecoderLM::bytes_held() const {
  std::size_t total = (embeddings_in_head_ ? 0 : token_embeddings_.bytes()) + position_embeddings_.bytes() +
                      final_norm_.gamma.bytes() + final_norm_.beta.bytes();
  for (const auto& l : layers_)
    total += l.attn_norm.gamma.bytes() + l.attn_norm.beta.bytes() + l.mlp_norm.gamma.bytes() + l.mlp_norm.beta.bytes() +
             l.q_norm.gamma.bytes() + l.k_norm.gamma.bytes() + l.attn_post_norm.gamma.bytes() +
             l.mlp_post_norm.gamma.bytes();
  for (const auto& l : all_linears_) total += l.linear->bytes_held();
  return total;
}

std::size_t DecoderLM::fp32_bytes() const {
  std::size_t total = bytes_held();
  // In FP32 the embeddings are 4 bytes a value, and a tied model's are its head's rows unless scaled.
  const bool shared_in_fp32 =
      config_.tie_word_embeddings && config_.embedding_scale == 1.0f && ops_->device().kind == Device::Kind::cpu;
  if (!embeddings_in_head_) total -= token_embeddings_.bytes();
  if (!shared_in_fp32) total += static_cast<std::size_t>(config_.vocab_size * config_.hidden_size) * sizeof(float);
  for (const auto& l : all_linears_) total = total - l.linear->bytes_held() + l.fp32_bytes;
  return total;
}

}  // namespace qjoule::model

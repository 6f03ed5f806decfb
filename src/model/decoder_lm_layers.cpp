// DecoderLM's layer-at-a-time entries (calibration): the same operations as enqueue_forward, one layer.
#include "qjoule/error.h"
#include "qjoule/model/decoder_lm.h"

namespace qjoule::model {

void DecoderLM::embed(const int32_t* ids, int64_t n, float* x) const {
  if (n <= 0 || n > config_.max_positions)
    fail("calibration sequence of {} tokens; expected 1 to max_position_embeddings = {}", n, config_.max_positions);
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= config_.vocab_size)
      fail("token id {} at position {} is outside the vocabulary of {} tokens", ids[t], t, config_.vocab_size);
  }
  GraphOps& ops = *ops_;
  const Tensor id_tensor = ops.empty(DType::i32, n, "the token ids");
  ops.copy_in(ids, id_tensor);
  const Tensor out = ops.host_output(x, n * config_.hidden_size, "the hidden states");
  embed_rows(id_tensor, n, 0, out);
  ops.copy_out(out, x);
}

void DecoderLM::forward_layer(int64_t index, float* x, int64_t n) const {
  if (index < 0 || index >= static_cast<int64_t>(layers_.size()))
    fail("layer {} of a model with {} layers", index, layers_.size());
  if (n <= 0 || n > config_.max_positions)
    fail("calibration sequence of {} tokens; expected 1 to max_position_embeddings = {}", n, config_.max_positions);
  GraphOps& ops = *ops_;
  KvCache cache = make_cache(n);
  const Scratch s = make_scratch(n);
  const int64_t h = config_.hidden_size;
  ops.copy_in(x, s.x);
  const Layer& layer = layers_[static_cast<std::size_t>(index)];
  norm(layer.attn_norm, s.x, n, s.hn);
  const Segment whole{0, n, 0, &cache, 0};
  attention_block(layer, index, s, n, std::span(&whole, 1));
  add_norm(layer.mlp_norm, s.x, s.hn, n, s.hn);  // s.x: the stream after attention
  mlp_block(layer, s, n);
  ops.add(s.x, s.hn, n * h);
  ops.copy_out(s.x.slice(0, n * h), x);
}

void DecoderLM::replace_norms(int64_t index, const LayerNormParams& attn, const LayerNormParams& mlp) {
  if (index < 0 || index >= static_cast<int64_t>(layers_.size()))
    fail("layer {} of a model with {} layers", index, layers_.size());
  Layer& layer = layers_[static_cast<std::size_t>(index)];
  const auto replace = [&](Norm& n, const LayerNormParams& p) {
    if (static_cast<int64_t>(p.gamma.size()) != n.gamma.size() || static_cast<int64_t>(p.beta.size()) != n.beta.size())
      fail("{}: {} + {} values; expected {} + {}", p.name, p.gamma.size(), p.beta.size(), n.gamma.size(),
           n.beta.size());
    n = Norm{ops_->upload(p.gamma, p.name + ".weight"), ops_->upload(p.beta, p.name + ".bias")};
  };
  replace(layer.attn_norm, attn);
  replace(layer.mlp_norm, mlp);
}

void DecoderLM::replace_router(int64_t index, std::unique_ptr<kernels::Linear> router) {
  if (index < 0 || index >= static_cast<int64_t>(layers_.size()))
    fail("layer {} of a model with {} layers", index, layers_.size());
  Layer& layer = layers_[static_cast<std::size_t>(index)];
  if (!layer.router.linear || !router || router->out_features() != layer.router.linear->out_features() ||
      router->in_features() != layer.router.linear->in_features())
    fail("layer {}: a router to replace takes the shape of the one it replaces", index);
  for (auto& report : all_linears_)
    if (report.linear == layer.router.linear.get()) report.linear = router.get();
  layer.router.linear = std::move(router);
}

}  // namespace qjoule::model

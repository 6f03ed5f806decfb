#include "qjoule/model/decoder_lm.h"

#include <algorithm>
#include <cmath>

#include "model/streamed_linear_f32.h"
#include "qjoule/error.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/model/unused_tensors.h"

namespace qjoule::model {

KvCache::KvCache(int64_t layers, int64_t capacity, int64_t kv_dim)
    : layers_(layers),
      capacity_(capacity),
      kv_dim_(kv_dim),
      k_(static_cast<size_t>(layers * capacity * kv_dim)),
      v_(static_cast<size_t>(layers * capacity * kv_dim)) {}

void KvCache::truncate(int64_t tokens) {
  if (tokens < 0 || tokens > size_) fail("KV cache: cannot keep {} tokens of the {} it holds", tokens, size_);
  size_ = tokens;
}

DecoderLM::DecoderLM(DecoderParams params, const LinearFactory& factory)
    : config_(std::move(params.config)),
      token_embeddings_(std::move(params.token_embeddings)),
      position_embeddings_(std::move(params.position_embeddings)),
      final_norm_(std::move(params.final_norm)) {
  if (config_.arch != DecoderArch::Gpt2)
    rope_ = kernels::make_rope_table(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  // A deferred Linear's FP32 weights exist only while its own layer is built.
  auto build = [&](LinearParams& p, bool in_block) {
    if (params.load_linear && p.weight.empty()) params.load_linear(p);
    auto linear = factory(p, in_block);
    // From the shape: a streamed Linear has no weights loaded.
    const auto weights = static_cast<std::size_t>(p.out_features * (p.in_features + (with_bias(p) ? 1 : 0)));
    all_linears_.push_back({p.name, linear.get(), weights * sizeof(float)});
    free_weights(p);  // the params are this model's own: nothing else reads them
    return linear;
  };
  for (auto& lp : params.layers) {
    Layer layer;
    if (lp.fused_qkv) {
      layer.qkv = build(lp.qkv, true);
    } else {
      layer.q = build(lp.q, true);
      layer.k = build(lp.k, true);
      layer.v = build(lp.v, true);
    }
    layer.o = build(lp.o, true);
    if (lp.gate.out_features > 0) layer.gate = build(lp.gate, true);
    layer.up = build(lp.up, true);
    layer.down = build(lp.down, true);
    layer.attn_norm = std::move(lp.attn_norm);
    layer.mlp_norm = std::move(lp.mlp_norm);
    layers_.push_back(std::move(layer));
  }
  lm_head_ = build(params.lm_head, false);
}

KvCache DecoderLM::make_cache(int64_t capacity) const {
  if (capacity <= 0) capacity = config_.max_positions;
  if (capacity > config_.max_positions)
    fail("a KV cache of {} tokens is longer than the model's max_position_embeddings = {}", capacity,
         config_.max_positions);
  return KvCache(config_.num_layers, capacity, config_.kv_dim());
}

void DecoderLM::norm(const LayerNormParams& p, const float* x, int64_t rows, float* out) const {
  const int64_t h = config_.hidden_size;
  if (p.beta.empty()) {
    kernels::rms_norm_f32(x, rows, h, p.gamma.data(), config_.norm_eps, out);
  } else {
    if (out != x) std::copy_n(x, rows * h, out);
    kernels::add_layer_norm_f32(out, nullptr, rows, h, p.gamma.data(), p.beta.data(), config_.norm_eps);
  }
}

void DecoderLM::attention_block(const Layer& layer, int64_t index, float* x, int64_t n, KvCache& cache) const {
  const int64_t h = config_.hidden_size, qd = config_.q_dim(), kvd = config_.kv_dim();
  const int64_t past = cache.size_;
  std::vector<float> hn(static_cast<size_t>(n * h));
  norm(layer.attn_norm, x, n, hn.data());

  // Q, K and V: one fused Linear (GPT-2's c_attn, rows [q | k | v]) or three blocks [n, q | k | v].
  std::vector<float> qkv(static_cast<size_t>(n * (qd + 2 * kvd)));
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  int64_t q_stride = qd, kv_stride = kvd;
  if (layer.qkv) {
    layer.qkv->forward(hn.data(), n, qkv.data());
    q_stride = kv_stride = qd + 2 * kvd;
    q = qkv.data();
    k = q + qd;
    v = k + kvd;
  } else {
    float* qb = qkv.data();
    float* kb = qb + n * qd;
    float* vb = kb + n * kvd;
    layer.q->forward(hn.data(), n, qb);
    layer.k->forward(hn.data(), n, kb);
    layer.v->forward(hn.data(), n, vb);
    kernels::apply_rope_f32(qb, n, qd, config_.num_heads, past, rope_);
    kernels::apply_rope_f32(kb, n, kvd, config_.num_kv_heads, past, rope_);
    q = qb;
    k = kb;
    v = vb;
  }
  float* kc = cache.k_.data() + index * cache.capacity_ * kvd;
  float* vc = cache.v_.data() + index * cache.capacity_ * kvd;
  for (int64_t t = 0; t < n; ++t) {
    std::copy_n(k + t * kv_stride, kvd, kc + (past + t) * kvd);
    std::copy_n(v + t * kv_stride, kvd, vc + (past + t) * kvd);
  }
  std::vector<float> ctx(static_cast<size_t>(n * qd));
  kernels::causal_attention_f32(q, q_stride, kc, vc, kvd, past, n, config_.num_heads, config_.num_kv_heads,
                                config_.head_dim, 1.0f / std::sqrt(static_cast<float>(config_.head_dim)), ctx.data());
  layer.o->forward(ctx.data(), n, hn.data());
  for (int64_t i = 0; i < n * h; ++i) x[i] += hn[static_cast<size_t>(i)];
}

void DecoderLM::mlp_block(const Layer& layer, float* x, int64_t n) const {
  const int64_t h = config_.hidden_size, f = config_.intermediate_size;
  std::vector<float> hn(static_cast<size_t>(n * h));
  norm(layer.mlp_norm, x, n, hn.data());
  std::vector<float> a(static_cast<size_t>(n * f));
  layer.up->forward(hn.data(), n, a.data());
  if (layer.gate) {
    std::vector<float> g(static_cast<size_t>(n * f));
    layer.gate->forward(hn.data(), n, g.data());
    kernels::silu_mul_f32(g.data(), a.data(), n * f);
    a.swap(g);
  } else if (config_.activation == "gelu") {
    kernels::gelu_erf_f32(a.data(), n * f);
  } else {
    kernels::gelu_tanh_f32(a.data(), n * f);
  }
  layer.down->forward(a.data(), n, hn.data());
  for (int64_t i = 0; i < n * h; ++i) x[i] += hn[static_cast<size_t>(i)];
}

void DecoderLM::forward(const int32_t* ids, int64_t n, KvCache& cache, float* logits, int64_t logits_from) const {
  const int64_t h = config_.hidden_size;
  const int64_t past = cache.size_;
  if (n <= 0) fail("a forward pass needs at least one token, got {}", n);
  if (logits_from < 0 || logits_from >= n) fail("logits from token {} of {}: out of range", logits_from, n);
  if (cache.layers_ != config_.num_layers || cache.kv_dim_ != config_.kv_dim())
    fail("the KV cache was made for another model ({} layers × {} kv columns, expected {} × {})", cache.layers_,
         cache.kv_dim_, config_.num_layers, config_.kv_dim());
  if (past + n > config_.max_positions)
    fail("{} tokens after {} cached reach position {}, beyond the model's max_position_embeddings = {}", n, past,
         past + n, config_.max_positions);
  if (past + n > cache.capacity_)
    fail("{} tokens after {} cached exceed the KV cache's capacity of {} tokens", n, past, cache.capacity_);
  std::vector<float> x(static_cast<size_t>(n * h));
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= config_.vocab_size)
      fail("token id {} at position {} is outside the vocabulary of {} tokens", ids[t], past + t, config_.vocab_size);
    const float* e = token_embeddings_.data() + static_cast<int64_t>(ids[t]) * h;
    float* row = x.data() + t * h;
    std::copy_n(e, h, row);
    if (!position_embeddings_.empty()) {
      const float* p = position_embeddings_.data() + (past + t) * h;
      for (int64_t c = 0; c < h; ++c) row[c] += p[c];
    }
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    attention_block(layers_[i], static_cast<int64_t>(i), x.data(), n, cache);
    mlp_block(layers_[i], x.data(), n);
  }
  cache.size_ = past + n;
  const int64_t first = logits_from;
  const int64_t rows = n - first;
  norm(final_norm_, x.data() + first * h, rows, x.data() + first * h);
  lm_head_->forward(x.data() + first * h, rows, logits);
}

std::vector<LinearReport> DecoderLM::linear_reports() const {
  std::vector<LinearReport> out;
  for (const auto& l : all_linears_)
    out.push_back({l.name, l.linear->format(), l.linear->kernel_path(), l.linear->bytes_held(), l.fp32_bytes});
  return out;
}

std::map<std::string, int> DecoderLM::kernel_path_counts() const {
  std::map<std::string, int> counts;
  for (const auto& l : all_linears_) ++counts[l.linear->format() + " " + l.linear->kernel_path()];
  return counts;
}

std::size_t DecoderLM::bytes_held() const {
  std::size_t floats =
      token_embeddings_.size() + position_embeddings_.size() + final_norm_.gamma.size() + final_norm_.beta.size();
  for (const auto& l : layers_)
    floats += l.attn_norm.gamma.size() + l.attn_norm.beta.size() + l.mlp_norm.gamma.size() + l.mlp_norm.beta.size();
  std::size_t total = floats * sizeof(float);
  for (const auto& l : all_linears_) total += l.linear->bytes_held();
  return total;
}

std::size_t DecoderLM::fp32_bytes() const {
  std::size_t total = bytes_held();
  for (const auto& l : all_linears_) total = total - l.linear->bytes_held() + l.fp32_bytes;
  return total;
}

DecoderLM load_decoder_lm(const std::filesystem::path& dir, const LinearFactory& factory, std::string* unused_tensors) {
  const auto ck = io::Checkpoint::open(dir);
  auto config = load_decoder_config(dir, ck);
  DecoderLM model(load_decoder_params(ck, config, /*defer_linears=*/true), factory);  // every Linear read by now
  if (unused_tensors != nullptr) *unused_tensors = unused_tensors_warning(ck);
  return model;
}

DecoderLM load_decoder_lm_streamed(const std::filesystem::path& dir) {
  const auto ck = std::make_shared<const io::Checkpoint>(io::Checkpoint::open(dir));
  auto config = load_decoder_config(dir, *ck);
  auto params = load_decoder_params(*ck, config, /*defer_linears=*/true);
  // The Linears read the checkpoint at each forward: their loader keeps it open for the model's life.
  std::function<void(LinearParams&)> load = [ck, inner = std::move(params.load_linear)](LinearParams& p) { inner(p); };
  params.load_linear = nullptr;  // the constructor then builds each Linear from its shape alone
  return DecoderLM(std::move(params),
                   [load](const LinearParams& p, bool) { return make_streamed_linear_f32(p, load); });
}

}  // namespace qjoule::model

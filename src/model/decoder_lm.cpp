#include "qjoule/model/decoder_lm.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "model/streamed_linear_f32.h"
#include "model/tied_embeddings.h"
#include "qjoule/error.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/kernels/kernel_overrides.h"
#include "qjoule/model/fused_linear_params.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/model/unused_tensors.h"

namespace qjoule::model {

DecoderLM::DecoderLM(DecoderParams params, const LinearFactory& factory, std::shared_ptr<GraphOps> ops)
    : ops_(ops ? std::move(ops) : make_cpu_graph_ops()), config_(std::move(params.config)) {
  // QJOULE_DECODE_GRAPH=0: every decode step kernel by kernel (to measure what the recording buys).
  if (const auto graph = kernels::kernel_override(kernels::KernelOverride::decode_graph))
    decode_graph_on_ = *graph == "1";
  if (config_.activation != "silu") gate_ = Gate::gelu_tanh;  // read once, not in each layer's MLP
  if (config_.arch != DecoderArch::Gpt2) {
    const int64_t rotary = config_.rotary_dim > 0 ? config_.rotary_dim : config_.head_dim;
    auto rope = kernels::make_rope_table(rotary, config_.rope_theta, config_.rope_scaling);
    rope_inv_freq_ = ops_->upload(std::move(rope.inv_freq), "the RoPE frequencies");
    rope_attention_factor_ = rope.attention_factor;
    if (config_.rope_scaling.type == "longrope")  // its long factors, for forwards past the original positions
      rope_long_inv_freq_ =
          ops_->upload(kernels::make_rope_table(rotary, config_.rope_theta, config_.rope_scaling, true).inv_freq,
                       "the long RoPE frequencies");
    if (config_.local_rope_theta > 0.0)
      rope_local_inv_freq_ = ops_->upload(
          kernels::make_rope_table(config_.head_dim, config_.local_rope_theta, kernels::RopeScaling{}).inv_freq,
          "the sliding layers' RoPE frequencies");
  }
  // A pre-quantized Linear asked in another format: its own is built so that the remaining Linears'
  // tensor checks still speak first; the first such question is thrown once every Linear is built.
  std::optional<PrequantizedFormatMismatch> format_mismatch;
  // A deferred Linear's FP32 weights exist only while its own layer is built.
  auto build = [&](LinearParams& p, bool in_block) {
    if (params.load_linear && p.weight.empty() && !p.build_prequantized) params.load_linear(p);
    auto linear = build_keeping_format_mismatch(factory, p, in_block, format_mismatch);
    if (!linear) fail("{}: the Linear factory built nothing", p.name);
    // From the shape: a streamed Linear has no weights loaded.
    const auto weights = static_cast<std::size_t>(p.out_features * (p.in_features + (with_bias(p) ? 1 : 0)));
    all_linears_.push_back({p.name, linear.get(), weights * sizeof(float)});
    free_weights(p);  // the params are this model's own: nothing else reads them
    return OwnedLinear{std::move(linear), p.name};
  };
  auto upload = [&](std::vector<float>& v, const std::string& what) {
    Tensor t = ops_->upload(std::move(v), what);
    v = {};
    return t;
  };
  auto norm = [&](LayerNormParams& n) {
    return Norm{upload(n.gamma, n.name + ".weight"), upload(n.beta, n.name + ".bias")};
  };
  // Parts that read the same input as one Linear (Q | K | V, gate | up) where the factory builds it: their
  // FP32 weights, loaded here when deferred, concatenated. A pre-quantized or streamed part (no FP32
  // weights to concatenate) and a refusal (formats that differ, or cannot fuse) build the parts apart.
  auto build_fused = [&](const std::vector<LinearParams*>& parts) -> OwnedLinear {
    for (const LinearParams* p : parts) {
      if (p->build_prequantized || p->in_features != parts.front()->in_features) return {};
      if (p->weight.empty() && !params.load_linear) return {};
    }
    std::vector<const LinearParams*> loaded;
    std::size_t fp32 = 0;
    for (LinearParams* p : parts) {
      if (p->weight.empty()) params.load_linear(*p);
      loaded.push_back(p);
      fp32 += static_cast<std::size_t>(p->out_features * (p->in_features + (with_bias(*p) ? 1 : 0))) * sizeof(float);
    }
    LinearParams fused = fuse_linear_params(loaded);
    auto linear = factory(fused, true);
    if (!linear) return {};  // the parts keep their weights for their own Linears
    all_linears_.push_back({fused.name, linear.get(), fp32, static_cast<int>(parts.size())});
    for (LinearParams* p : parts) free_weights(*p);
    return OwnedLinear{std::move(linear), fused.name};
  };
  const double expert_share = config_.moe.num_experts > 0 ? static_cast<double>(config_.moe.experts_per_token) /
                                                                static_cast<double>(config_.moe.num_experts)
                                                          : 1.0;
  for (auto& lp : params.layers) {
    Layer layer;
    layer.window = config_.window(static_cast<int64_t>(layers_.size()));
    layer.local_rope = layer.window > 0 && !rope_local_inv_freq_.empty();
    if (lp.fused_qkv) {
      layer.qkv = build(lp.qkv, true);
    } else {
      layer.qkv = build_fused({&lp.q, &lp.k, &lp.v});
      if (!layer.qkv) {
        layer.q = build(lp.q, true);
        layer.k = build(lp.k, true);
        layer.v = build(lp.v, true);
      }
    }
    layer.o = build(lp.o, true);
    if (lp.gate_up.out_features > 0) {  // one checkpoint Linear: Phi-3's gate_up_proj
      layer.gate_up = build(lp.gate_up, true);
    } else if (lp.gate.out_features > 0) {
      layer.gate_up = build_fused({&lp.gate, &lp.up});
      if (!layer.gate_up) {
        layer.gate = build(lp.gate, true);
        layer.up = build(lp.up, true);
      }
    } else if (lp.experts.empty()) {
      layer.up = build(lp.up, true);
    }
    if (lp.experts.empty()) layer.down = build(lp.down, true);
    if (!lp.experts.empty()) layer.router = build(lp.router, false);  // not a block Linear: FP32 by default
    for (ExpertParams& ep : lp.experts) {
      const std::size_t first = all_linears_.size();
      Expert e;
      e.gate_up = build_fused({&ep.gate, &ep.up});
      if (!e.gate_up) {
        e.gate = build(ep.gate, true);
        e.up = build(ep.up, true);
      }
      e.down = build(ep.down, true);
      for (std::size_t i = first; i < all_linears_.size(); ++i) all_linears_[i].token_share = expert_share;
      layer.experts.push_back(std::move(e));
    }
    layer.attn_norm = norm(lp.attn_norm);
    layer.mlp_norm = norm(lp.mlp_norm);
    if (config_.qk_norm) {
      layer.q_norm = norm(lp.q_norm);
      layer.k_norm = norm(lp.k_norm);
    }
    if (config_.sandwich_norms) {
      layer.attn_post_norm = norm(lp.attn_post_norm);
      layer.mlp_post_norm = norm(lp.mlp_post_norm);
    }
    layers_.push_back(std::move(layer));
  }
  lm_head_ = build(params.lm_head, false);
  if (format_mismatch) throw *format_mismatch;
  if (config_.tie_word_embeddings && ops_->device().kind == Device::Kind::cpu)  // one matrix: read once held
    token_embeddings_ = tied_embeddings_view(*lm_head_.linear, params.token_embeddings, params.token_embeddings_bf16,
                                             config_.embedding_scale);
  embeddings_in_head_ = !token_embeddings_.empty();
  if (embeddings_in_head_) {
    params.token_embeddings = {};
    params.token_embeddings_bf16 = {};
  } else if (!params.token_embeddings_bf16.empty()) {  // as stored; scaled when looked up
    token_embeddings_ = ops_->upload_bf16(std::move(params.token_embeddings_bf16), "the token embeddings (BF16)");
  } else {
    if (config_.embedding_scale != 1.0f)  // Gemma: the embeddings' rows scaled, not the tied head
      for (float& e : params.token_embeddings) e *= config_.embedding_scale;
    token_embeddings_ = upload(params.token_embeddings, "the token embeddings");
  }
  position_embeddings_ = upload(params.position_embeddings, "the position embeddings");
  final_norm_ = norm(params.final_norm);
}

std::string DecoderLM::nongemm_path() const {
  // What runs: RMSNorm models add the residual inside the next norm (add_rms_norm); LayerNorm ones add,
  // then norm. Fused gate | up gives silu_mul_rows, separate ones silu_mul.
  const bool rms = final_norm_.beta.empty();
  // A mixture's layers: their experts' MLPs (SwiGLU, fused gate | up where the factory fused them).
  const bool experts = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return !l.experts.empty(); });
  const bool fused_experts = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) {
    return std::any_of(l.experts.begin(), l.experts.end(), [](const Expert& e) { return bool(e.gate_up); });
  });
  const bool fused_mlp = experts ? fused_experts : !layers_.empty() && layers_.front().gate_up;
  const bool gated = experts || (!layers_.empty() && (layers_.front().gate || layers_.front().gate_up));
  // RoPE over fused q | k | v rows stores k and v in the same operation (rope_store_kv).
  const bool fused_rope = !rope_inv_freq_.empty() && !layers_.empty() && layers_.front().qkv;
  const bool geglu = gated && config_.activation != "silu";
  const bool windowed = std::any_of(layers_.begin(), layers_.end(), [](const Layer& l) { return l.window > 0; });
  const std::string moe = config_.moe.num_experts == 0
                              ? ""
                              : fmt::format(" (mixture: router fp32, top-{} of {} experts, add_scaled)",
                                            config_.moe.experts_per_token, config_.moe.num_experts);
  return fmt::format("{}: {}, {}{}, {}, causal_attention{}, {}{}", ops_->nongemm_path(),
                     token_embeddings_.dtype() == DType::bf16 ? "embedding_bf16" : "embedding_sum",
                     rms ? "rms_norm, add_rms_norm" : "add, add_layer_norm", config_.qk_norm ? ", head_rms_norm" : "",
                     fused_rope               ? "rope_store_kv"
                     : rope_inv_freq_.empty() ? "store_kv"
                                              : "rope, store_kv",
                     windowed ? " (sliding window)" : "",
                     fused_mlp                      ? (geglu ? "gelu_tanh_mul_rows" : "silu_mul_rows")
                     : gated                        ? (geglu ? "gelu_tanh_mul" : "silu_mul")
                     : config_.activation == "gelu" ? "gelu_erf"
                                                    : "gelu_tanh",
                     moe);
}

KvCache DecoderLM::make_cache(int64_t capacity, int64_t rewind) const {
  if (capacity <= 0) capacity = config_.max_positions;
  if (capacity > config_.max_positions)
    fail("a KV cache of {} tokens is longer than the model's max_position_embeddings = {}", capacity,
         config_.max_positions);
  std::vector<int64_t> rows, windows;
  for (const Layer& layer : layers_) {
    windows.push_back(layer.window);
    // A ring where the window (and the rewind) are shorter than the cache; on the CPU, whose attention
    // reads the ring (decoder_lm_window.cpp).
    const bool ring = rewind >= 0 && layer.window > 0 && ops_->device().kind == Device::Kind::cpu;
    rows.push_back(ring ? std::min(capacity, layer.window + rewind) : capacity);
  }
  return KvCache(*ops_, config_.num_layers, capacity, config_.kv_dim(), std::move(rows), std::move(windows));
}

void DecoderLM::linear(const OwnedLinear& l, const Tensor& x, int64_t m, const Tensor& y) const {
  ops_->linear(*l.linear, l.name, x, m, y);
}

void DecoderLM::norm(const Norm& p, const Tensor& x, int64_t rows, const Tensor& out) const {
  const int64_t h = config_.hidden_size;
  if (p.beta.empty()) {
    ops_->rms_norm(x, rows, h, p.gamma, config_.norm_eps, out);
  } else {
    if (out.f32() != x.f32()) ops_->copy_rows(out, h, x, h, h, rows);
    ops_->add_layer_norm(out, {}, rows, h, p.gamma, p.beta, config_.norm_eps);
  }
}

void DecoderLM::add_norm(const Norm& p, const Tensor& x, const Tensor& residual, int64_t rows,
                         const Tensor& out) const {
  const int64_t h = config_.hidden_size;
  if (p.beta.empty()) {
    ops_->add_rms_norm(x, residual, rows, h, p.gamma, config_.norm_eps, out);
  } else {
    ops_->add(x, residual, rows * h);
    norm(p, x, rows, out);
  }
}

// Reads the normalized input in s.hn; leaves the output projection in s.hn (the caller adds it to s.x).
void DecoderLM::attention_block(const Layer& layer, int64_t index, const Scratch& s, int64_t n,
                                std::span<const Segment> segments) const {
  GraphOps& ops = *ops_;
  const int64_t qd = config_.q_dim(), kvd = config_.kv_dim();

  // Q, K and V of all n rows: one fused Linear (rows [q | k | v]: GPT-2's c_attn, or Llama's three
  // fused) or three blocks [n, q | k | v]. Fused, each row's k heads follow its q heads: one RoPE
  // rotates both, and stores k and v in the caches (rope_store_kv: one kernel on the GPU).
  int64_t q_stride = qd, kv_stride = kvd, k_at = 0, v_at = 0;
  const bool rope = !rope_inv_freq_.empty();
  // RoPE over fused rows stores k and v itself, where it turns whole heads (not a partial rotary factor's).
  const bool partial = config_.rotary_dim > 0 && config_.rotary_dim < config_.head_dim;
  const bool rope_stores = layer.qkv && rope && !partial;
  if (layer.qkv) {
    linear(layer.qkv, s.hn, n, s.qkv);
    q_stride = kv_stride = qd + 2 * kvd;
    k_at = qd;
    v_at = qd + kvd;
  } else {
    k_at = aligned_elements(n * qd);
    v_at = k_at + aligned_elements(n * kvd);
    linear(layer.q, s.hn, n, s.qkv.slice(0, n * qd));
    linear(layer.k, s.hn, n, s.qkv.slice(k_at, n * kvd));
    linear(layer.v, s.hn, n, s.qkv.slice(v_at, n * kvd));
  }
  // Qwen3: each head of q and of k RMS-normalized over its head_dim values, before RoPE.
  // OLMoE: all of q's columns as one vector, and all of k's.
  if (!layer.q_norm.gamma.empty()) {
    const bool whole = config_.qk_norm_whole;
    ops.head_rms_norm(s.qkv, n, q_stride, whole ? 1 : config_.num_heads, whole ? qd : config_.head_dim,
                      layer.q_norm.gamma, config_.norm_eps);
    ops.head_rms_norm(layer.qkv ? s.qkv.slice(k_at, n * q_stride - k_at) : s.qkv.slice(k_at, n * kvd), n, kv_stride,
                      whole ? 1 : config_.num_kv_heads, whole ? kvd : config_.head_dim, layer.k_norm.gamma,
                      config_.norm_eps);
  }
  // Each segment's rows over its own cache: q, k and v as views of its rows.
  const float rope_factor = layer.local_rope ? 1.0f : rope_attention_factor_;
  const float scale =
      config_.attention_scale > 0.0f ? config_.attention_scale : 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
  for (const Segment& g : segments) {
    const Tensor kc = g.cache->keys(index), vc = g.cache->values(index);
    const int64_t first = g.row * q_stride;  // fused: the segment's first row
    const Tensor q = layer.qkv ? s.qkv.slice(first, g.n * q_stride) : s.qkv.slice(g.row * qd, g.n * qd);
    const Tensor k =
        layer.qkv ? s.qkv.slice(first + k_at, g.n * q_stride - k_at) : s.qkv.slice(k_at + g.row * kvd, g.n * kvd);
    const Tensor v =
        layer.qkv ? s.qkv.slice(first + v_at, g.n * q_stride - v_at) : s.qkv.slice(v_at + g.row * kvd, g.n * kvd);
    // LongRoPE's long factors where the forward reaches past the original positions (as transformers picks
    // them: by the last position of the forward).
    const bool long_rope =
        !rope_long_inv_freq_.empty() && g.past + g.n > config_.rope_scaling.original_max_position_embeddings;
    const Tensor& inv_freq = layer.local_rope ? rope_local_inv_freq_ : long_rope ? rope_long_inv_freq_ : rope_inv_freq_;
    const Tensor ctx = s.ctx.slice(g.row * qd, g.n * qd);
    if (g.cache->ring(index)) {  // keys stored at ring rows, RoPE at their positions: apart
      if (rope) {
        ops.rope(q, g.n, q_stride, config_.num_heads, g.past, inv_freq, rope_factor, config_.head_dim);
        ops.rope(k, g.n, kv_stride, config_.num_kv_heads, g.past, inv_freq, rope_factor, config_.head_dim);
      }
      ring_attention(layer, index, s, g, q, q_stride, k, v, kv_stride, scale, ctx);
      continue;
    }
    if (rope_stores) {
      ops.rope_store_kv(q, g.n, q_stride, config_.num_heads, config_.num_kv_heads, g.past, inv_freq, rope_factor, kc,
                        vc, kvd);
    } else {
      if (rope) {
        ops.rope(q, g.n, q_stride, config_.num_heads, g.past, inv_freq, rope_factor, config_.head_dim);
        ops.rope(k, g.n, kv_stride, config_.num_kv_heads, g.past, inv_freq, rope_factor, config_.head_dim);
      }
      ops.store_kv(k, v, kv_stride, kc, vc, kvd, g.past, g.n, kvd);
    }
    ops.causal_attention(q, q_stride, kc, vc, kvd, g.past, g.n, config_.num_heads, config_.num_kv_heads,
                         config_.head_dim, scale, ctx, layer.window);
  }
  linear(layer.o, s.ctx, n, s.hn);
  if (!layer.attn_post_norm.gamma.empty()) norm(layer.attn_post_norm, s.hn, n, s.hn);
}

// Reads the normalized input in s.hn; leaves the down projection in s.hn (the caller adds it to s.x).
void DecoderLM::mlp_block(const Layer& layer, const Scratch& s, int64_t n) const {
  GraphOps& ops = *ops_;
  if (!layer.experts.empty()) return moe_block(layer, s, n);
  const int64_t f = config_.intermediate_size;
  if (layer.gate_up || layer.gate) {
    gated_mlp(layer.gate_up, layer.gate, layer.up, layer.down, f, s.hn, n, s.hn, s);
  } else {
    linear(layer.up, s.hn, n, s.a);
    ops.activation(config_.activation == "gelu" ? Activation::gelu_erf : Activation::gelu_tanh, s.a, n * f);
    linear(layer.down, s.a, n, s.hn);
  }
  if (!layer.mlp_post_norm.gamma.empty()) norm(layer.mlp_post_norm, s.hn, n, s.hn);
}

void DecoderLM::gated_mlp(const OwnedLinear& gate_up, const OwnedLinear& gate, const OwnedLinear& up,
                          const OwnedLinear& down, int64_t f, const Tensor& x, int64_t m, const Tensor& y,
                          const Scratch& s) const {
  if (gate_up) {
    linear(gate_up, x, m, s.g);
    ops_->gated_mul_rows(gate_, s.g, m, f, s.a);
    linear(down, s.a, m, y);
  } else {
    linear(up, x, m, s.a);
    linear(gate, x, m, s.g);
    ops_->gated_mul(gate_, s.g, s.a, m * f);
    linear(down, s.g, m, y);
  }
}

double DecoderLM::forward_timed(const int32_t* ids, int64_t n, KvCache& cache, float* logits,
                                int64_t logits_from) const {
  return timed_ms([&] { forward(ids, n, cache, logits, logits_from); });
}

double DecoderLM::timed_ms(const std::function<void()>& body) const {
  ops_->start_timer();
  body();
  return ops_->stop_timer_ms();
}

void DecoderLM::check_forward(const int32_t* ids, int64_t n, const KvCache& cache, int64_t logits_from,
                              std::string_view what) const {
  const int64_t past = cache.size_;
  const std::string of = what.empty() ? std::string() : fmt::format("{}: ", what);
  if (n <= 0) fail("{}a forward pass needs at least one token, got {}", of, n);
  if (logits_from < 0 || logits_from >= n) fail("{}logits from token {} of {}: out of range", of, logits_from, n);
  if (cache.layers_ != config_.num_layers || cache.kv_dim_ != config_.kv_dim())
    fail("{}the KV cache was made for another model ({} layers × {} kv columns, expected {} × {})", of, cache.layers_,
         cache.kv_dim_, config_.num_layers, config_.kv_dim());
  for (int64_t l = 0; l < cache.layers_; ++l)
    if (cache.ring(l) && cache.window_[static_cast<std::size_t>(l)] != layers_[static_cast<std::size_t>(l)].window)
      fail("{}the KV cache's layer {} is a ring for a window of {}, the model's is {}", of, l,
           cache.window_[static_cast<std::size_t>(l)], layers_[static_cast<std::size_t>(l)].window);
  if (cache.k_.device() != ops_->device())
    fail("{}the KV cache lives on {}, the model on {}", of, to_string(cache.k_.device()), to_string(ops_->device()));
  if (past + n > config_.max_positions)
    fail("{}{} tokens after {} cached reach position {}, beyond the model's max_position_embeddings = {}", of, n, past,
         past + n, config_.max_positions);
  if (past + n > cache.capacity_)
    fail("{}{} tokens after {} cached exceed the KV cache's capacity of {} tokens", of, n, past, cache.capacity_);
  for (int64_t t = 0; t < n; ++t) {
    if (ids[t] < 0 || ids[t] >= config_.vocab_size)
      fail("{}token id {} at position {} is outside the vocabulary of {} tokens", of, ids[t], past + t,
           config_.vocab_size);
  }
}

void DecoderLM::forward(const int32_t* ids, int64_t n, KvCache& cache, float* logits, int64_t logits_from) const {
  check_forward(ids, n, cache, logits_from, "");
  if (n == 1 && logits_from == 0 && decode_step_graph(ids[0], cache, logits)) return;
  GraphOps& ops = *ops_;
  const Tensor id_tensor = ops.empty(DType::i32, n, "the token ids");
  ops.copy_in(ids, id_tensor);
  Scratch s = make_scratch(n);
  const Tensor out = ops.host_output(logits, (n - logits_from) * config_.vocab_size, "the logits");
  const Segment whole{0, n, cache.size_, &cache, logits_from};
  add_window_scratch(s, n, std::span(&whole, 1));
  enqueue_forward(id_tensor, n, std::span(&whole, 1), s, out);
  cache.size_ += n;
  ops.copy_out(out, logits);
}

DecoderLM::Scratch DecoderLM::make_scratch(int64_t n) const {
  // Activations, every one written before it is read, in one uninitialized block. Q, K and V: one
  // [n, q | k | v] tensor from a fused Linear, or three blocks, each starting aligned.
  const int64_t h = config_.hidden_size, f = std::max(config_.intermediate_size, config_.moe.expert_intermediate_size);
  const int64_t qkv_size = std::max(n * (config_.q_dim() + 2 * config_.kv_dim()),
                                    aligned_elements(n * config_.q_dim()) + 2 * aligned_elements(n * config_.kv_dim()));
  const auto [x, hn, qkv, ctx, a, g] =
      carve<6>(*ops_, DType::f32, {n * h, n * h, qkv_size, n * config_.q_dim(), n * f, 2 * n * f}, "the activations");
  Scratch s{x, hn, qkv, ctx, a, g, {}, {}, {}, {}, {}, {}, {}, {}};
  if (config_.moe.num_experts > 0) {
    const auto moe =
        carve<4>(*ops_, DType::f32, {n * config_.moe.num_experts, n * h, n * h, n * h}, "the mixture's activations");
    s.route = moe[0];
    s.xin = moe[1];
    s.xe = moe[2];
    s.ye = moe[3];
  }
  return s;
}

void DecoderLM::enqueue_forward(const Tensor& ids, int64_t n, std::span<const Segment> segments, const Scratch& s,
                                const Tensor& out) const {
  const int64_t h = config_.hidden_size;
  for (const Segment& g : segments) embed_rows(ids.slice(g.row, g.n), g.n, g.past, s.x.slice(g.row * h, g.n * h));
  // Each block leaves its output in s.hn; the next norm adds it to the residual stream s.x first.
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i == 0) {
      norm(layers_[i].attn_norm, s.x, n, s.hn);
    } else {
      add_norm(layers_[i].attn_norm, s.x, s.hn, n, s.hn);
    }
    attention_block(layers_[i], static_cast<int64_t>(i), s, n, segments);
    add_norm(layers_[i].mlp_norm, s.x, s.hn, n, s.hn);
    mlp_block(layers_[i], s, n);
  }
  // The rows that give logits: one segment's are contiguous in s.x; several segments' are gathered.
  Tensor x = s.x, hn = s.hn;
  int64_t rows = 0;
  if (segments.size() == 1) {
    const Segment& g = segments.front();
    rows = g.n - g.logits_from;
    x = s.x.slice(g.logits_from * h, rows * h);
    hn = s.hn.slice(g.logits_from * h, rows * h);
  } else {
    for (const Segment& g : segments) {
      const int64_t from = (g.row + g.logits_from) * h, count = g.n - g.logits_from;
      ops_->copy_rows(s.lx.slice(rows * h, count * h), h, s.x.slice(from, count * h), h, h, count);
      ops_->copy_rows(s.lhn.slice(rows * h, count * h), h, s.hn.slice(from, count * h), h, h, count);
      rows += count;
    }
    x = s.lx.slice(0, rows * h);
    hn = s.lhn.slice(0, rows * h);
  }
  if (layers_.empty()) {
    norm(final_norm_, x, rows, x);
  } else {
    add_norm(final_norm_, x, hn, rows, x);
  }
  linear(lm_head_, x, rows, out);
}

void DecoderLM::embed_rows(const Tensor& ids, int64_t n, int64_t past, const Tensor& out) const {
  if (token_embeddings_.dtype() == DType::bf16) {
    ops_->embedding_bf16(ids, token_embeddings_, config_.embedding_scale, config_.hidden_size, out);
  } else {
    ops_->embedding_sum(ids, token_embeddings_, position_embeddings_, {}, n, past, config_.hidden_size, out);
  }
}

DecoderLM load_decoder_lm(const std::filesystem::path& dir, const LinearFactory& factory, std::string* unused_tensors,
                          std::shared_ptr<GraphOps> ops, const std::function<void(DecoderParams&)>& adjust) {
  const auto ck = io::Checkpoint::open(dir);
  auto config = load_decoder_config(dir, ck);
  auto params = load_decoder_params(ck, config, /*defer_linears=*/true);
  if (adjust) adjust(params);
  DecoderLM model(std::move(params), factory, std::move(ops));  // every Linear read by now
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

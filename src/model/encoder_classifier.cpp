#include "qjoule/model/encoder_classifier.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/encoder_ops.h"
#include "qjoule/kernels/kernel_overrides.h"
#include "qjoule/model/fused_linear_params.h"
#include "qjoule/model/quantization_plan.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::model {

LinearFactory fp32_linear_factory() {
  return [](const LinearParams& p, bool /*in_block*/) {
    if (p.build_prequantized)
      fail(
          "{}: the checkpoint holds this Linear as {} codes; FP32 needs the unquantized model (run this one with "
          "--precision {})",
          p.name, p.prequantized_from, quant::to_string(p.prequantized_spec));
    return kernels::make_linear_f32_onednn(p.weight.data(), p.bias.empty() ? nullptr : p.bias.data(), p.out_features,
                                           p.in_features);
  };
}

ActivationDtype parse_activation_dtype(const std::string& text) {
  if (text == "f32" || text == "fp32") return ActivationDtype::f32;
  if (text == "bf16") return ActivationDtype::bf16;
  fail("--act-dtype '{}' is not supported, expected f32 or bf16", text);
}

std::string to_string(ActivationDtype dtype) { return dtype == ActivationDtype::bf16 ? "bf16" : "f32"; }

std::string EncoderClassifier::activation_path() const {
  if (activations_ == ActivationDtype::f32) return "f32";
  return "bf16 (emulated: activations rounded to BF16 between operations, FP32 arithmetic inside them; "
         "speed not representative)";
}

void EncoderClassifier::round_activations(const Tensor& x, int64_t n) const {
  if (activations_ == ActivationDtype::bf16) ops_->round_to_bf16(x, n);
}

void EncoderClassifier::linear(const OwnedLinear& l, const Tensor& x, int64_t m, const Tensor& y) const {
  ops_->linear(*l.linear, l.name, x, m, y);
}

std::string EncoderClassifier::nongemm_path() const {
  return fmt::format(
      "{}: embedding_sum, add_layer_norm, attention, {}, {}{}{}", ops_->nongemm_path(),
      config_.activation == "relu" ? "relu" : "gelu_erf", config_.arch == EncoderArch::Bert ? "tanh" : "relu",
      activations_ == ActivationDtype::bf16 ? ", round_to_bf16" : "",
      ops_->device().kind == Device::Kind::cpu ? fmt::format("; passes of <= {} tokens", cpu_tokens_per_pass())
                                               : std::string());
}

int64_t cpu_tokens_per_pass() {
  static const int64_t tokens = kernels::kernel_override_count(kernels::KernelOverride::tokens_per_pass)
                                    .value_or(EncoderClassifier::kCpuTokensPerPass);
  return tokens;
}

EncoderClassifier::EncoderClassifier(EncoderParams params, const LinearFactory& factory, ActivationDtype activations,
                                     std::shared_ptr<GraphOps> ops)
    : ops_(ops ? std::move(ops) : make_cpu_graph_ops()), config_(std::move(params.config)), activations_(activations) {
  if (config_.num_heads <= 0 || config_.hidden_size % config_.num_heads != 0)
    fail("{}: hidden size {} is not a multiple of the {} attention heads", config_.architecture, config_.hidden_size,
         config_.num_heads);
  const int64_t h = config_.hidden_size;
  // A pre-quantized Linear asked in another format: built in its own so that the other Linears' tensor
  // checks still speak first; the first such question is thrown once every Linear is built (DecoderLM too).
  std::optional<PrequantizedFormatMismatch> format_mismatch;
  auto build = [&](LinearParams& p, bool in_block) {
    auto linear = build_keeping_format_mismatch(factory, p, in_block, format_mismatch);
    if (!linear) fail("{}: the Linear factory built nothing", p.name);
    all_linears_.push_back({p.name, linear.get()});
    free_weights(p);  // the Linear holds its own copy in its own format
    return OwnedLinear{std::move(linear), p.name};
  };
  auto upload = [&](std::vector<float>& v, const std::string& what) {
    Tensor t = ops_->upload(std::move(v), what);
    v = {};
    return t;
  };
  for (auto& lp : params.layers) {
    Layer layer;
    // Q, K and V fused into one Linear from their FP32 weights; a pre-quantized checkpoint's run as they are.
    const bool prequantized = lp.q.build_prequantized || lp.k.build_prequantized || lp.v.build_prequantized;
    if (!prequantized && lp.q.out_features == h && lp.k.out_features == h && lp.v.out_features == h) {
      const LinearParams fused = fuse_linear_params({&lp.q, &lp.k, &lp.v});
      layer.qkv = OwnedLinear{factory(fused, true), fused.name};
      if (layer.qkv) {
        all_linears_.push_back({fused.name, layer.qkv.linear.get(), true});
        for (LinearParams* p : {&lp.q, &lp.k, &lp.v}) {
          free_weights(*p);
        }
      }
    }
    if (!layer.qkv) {
      layer.q = build(lp.q, true);
      layer.k = build(lp.k, true);
      layer.v = build(lp.v, true);
    }
    layer.o = build(lp.o, true);
    layer.ffn_in = build(lp.ffn_in, true);
    layer.ffn_out = build(lp.ffn_out, true);
    layer.attn_gamma = upload(lp.attn_norm.gamma, lp.attn_norm.name + ".weight");
    layer.attn_beta = upload(lp.attn_norm.beta, lp.attn_norm.name + ".bias");
    layer.ffn_gamma = upload(lp.ffn_norm.gamma, lp.ffn_norm.name + ".weight");
    layer.ffn_beta = upload(lp.ffn_norm.beta, lp.ffn_norm.name + ".bias");
    layers_.push_back(std::move(layer));
  }
  head_dense_ = build(params.head_dense, false);
  classifier_ = build(params.classifier, false);
  if (format_mismatch) throw *format_mismatch;
  word_embeddings_ = upload(params.word_embeddings, "the word embeddings");
  position_embeddings_ = upload(params.position_embeddings, "the position embeddings");
  if (!params.token_type_embeddings.empty()) {
    // forward() adds token type 0 to every token: only that row is held.
    params.token_type_embeddings.resize(static_cast<std::size_t>(h));
    params.token_type_embeddings.shrink_to_fit();
    token_type0_ = upload(params.token_type_embeddings, "token type embedding 0");
  }
  embedding_gamma_ = upload(params.embedding_norm.gamma, params.embedding_norm.name + ".weight");
  embedding_beta_ = upload(params.embedding_norm.beta, params.embedding_norm.name + ".bias");
}

double EncoderClassifier::forward_timed(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                        float* logits) const {
  ops_->start_timer();
  forward(ids, mask, batch, seq, logits);
  return ops_->stop_timer_ms();
}

int64_t EncoderClassifier::sequences_per_pass(int64_t batch, int64_t seq) const {
  if (ops_->device().kind != Device::Kind::cpu) return batch;
  return std::clamp<int64_t>(cpu_tokens_per_pass() / seq, 1, batch);
}

void EncoderClassifier::check_ids(const int32_t* ids, int64_t batch, int64_t seq) const {
  if (batch <= 0 || seq <= 0) fail("forward: batch {} × sequence {} is empty", batch, seq);
  if (seq > config_.max_positions)
    fail("forward: sequence length {} exceeds max_position_embeddings {}", seq, config_.max_positions);
  for (int64_t i = 0; i < batch * seq; ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      fail("forward: token id {} at batch row {}, position {} is outside the vocabulary [0, {})", ids[i], i / seq,
           i % seq, config_.vocab_size);
  }
}

void EncoderClassifier::forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                float* logits) const {
  check_ids(ids, batch, seq);
  const int64_t per_pass = sequences_per_pass(batch, seq), rows = per_pass * seq;
  std::unique_lock<std::mutex> lock(workspace_->mutex, std::try_to_lock);
  if (lock.owns_lock() && (workspace_->rows != rows || workspace_->per_pass != per_pass)) {
    workspace_->buffers = {};  // the old block goes before the new one is allocated
    workspace_->buffers = pass_buffers(per_pass, seq);
    workspace_->rows = rows;
    workspace_->per_pass = per_pass;
  }
  const PassBuffers buffers = lock.owns_lock() ? workspace_->buffers : pass_buffers(per_pass, seq);
  for (int64_t first = 0; first < batch; first += per_pass) {
    const int64_t n = std::min(per_pass, batch - first);
    forward_pass(ids + first * seq, mask + first * seq, n, seq, logits + first * config_.num_labels, buffers);
  }
}

EncoderClassifier::PassBuffers EncoderClassifier::pass_buffers(int64_t per_pass, int64_t seq) const {
  GraphOps& ops = *ops_;
  const int64_t h = config_.hidden_size, rows = per_pass * seq;
  // The inputs on the device, one pass's worth.
  const auto [id_tensor, mask_tensor] = carve<2>(ops, DType::i32, {rows, rows}, "the ids and mask");
  // Activations, every one written before it is read: one uninitialized block (zeroing would be a
  // pass over ~30 MB per DistilBERT-base batch of 8 × 128), sized for one pass and reused by every
  // pass. Q, K and V are one [rows, 3h] tensor from a fused Linear, or its three [rows, h] thirds,
  // each starting aligned.
  const int64_t f = config_.intermediate_size, third = aligned_elements(rows * h);
  const auto [x, qkv, ctx, tmp, ffn, cls, pooled] =
      carve<7>(ops, DType::f32, {rows * h, 3 * third, rows * h, rows * h, rows * f, per_pass * h, per_pass * h},
               "the activations");
  return PassBuffers{id_tensor, mask_tensor, x, qkv, ctx, tmp, ffn, cls, pooled};
}

void EncoderClassifier::forward_pass(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits,
                                     const PassBuffers& b) const {
  const int64_t h = config_.hidden_size, labels = config_.num_labels;
  const int64_t rows = batch * seq;
  GraphOps& ops = *ops_;
  const Tensor id_tensor = b.ids.slice(0, rows), mask_tensor = b.mask.slice(0, rows);
  ops.copy_in(ids, id_tensor);
  ops.copy_in(mask, mask_tensor);
  const Tensor &x = b.x, &cls = b.cls, &pooled = b.pooled;
  const Tensor out = ops.host_output(logits, batch * labels, "the logits");

  embed_pass(id_tensor, rows, seq, x);
  for (const Layer& layer : layers_) block_pass(layer, b, mask_tensor, batch, seq);

  // Head on the first ([CLS]) token of each sequence.
  ops.copy_rows(cls, h, x, seq * h, h, batch);
  linear(head_dense_, cls, batch, pooled);
  round_activations(pooled, batch * h);
  ops.activation(config_.arch == EncoderArch::Bert ? Activation::tanh : Activation::relu, pooled, batch * h);
  round_activations(pooled, batch * h);
  linear(classifier_, pooled, batch, out);
  ops.copy_out(out, logits);
}

// Embeddings: word + position (+ token type 0 for BERT), then LayerNorm.
void EncoderClassifier::embed_pass(const Tensor& ids, int64_t rows, int64_t seq, const Tensor& x) const {
  const int64_t h = config_.hidden_size;
  ops_->embedding_sum(ids, word_embeddings_, position_embeddings_, token_type0_, seq, 0, h, x);
  ops_->add_layer_norm(x, {}, rows, h, embedding_gamma_, embedding_beta_, config_.layer_norm_eps);
  round_activations(x, rows * h);
}

void EncoderClassifier::block_pass(const Layer& layer, const PassBuffers& b, const Tensor& mask, int64_t batch,
                                   int64_t seq) const {
  const int64_t h = config_.hidden_size, f = config_.intermediate_size, rows = batch * seq;
  GraphOps& ops = *ops_;
  const Tensor &x = b.x, &qkv = b.qkv, &ctx = b.ctx, &tmp = b.tmp, &ffn = b.ffn;
  const int64_t third = b.qkv.size() / 3;
  const Activation ffn_activation = config_.activation == "relu" ? Activation::relu : Activation::gelu_erf;
  int64_t k_offset = 0, v_offset = 0, stride = h;
  if (layer.qkv) {
    linear(layer.qkv, x, rows, qkv);
    k_offset = h;
    v_offset = 2 * h;
    stride = 3 * h;
    round_activations(qkv, 3 * rows * h);
  } else {
    k_offset = third;
    v_offset = 2 * third;
    for (const auto& [part, offset] : {std::pair{&layer.q, int64_t{0}}, {&layer.k, k_offset}, {&layer.v, v_offset}}) {
      linear(*part, x, rows, qkv.slice(offset, rows * h));
      round_activations(qkv.slice(offset, rows * h), rows * h);
    }
  }
  ops.attention(qkv, k_offset, v_offset, stride, mask, batch, seq, config_.num_heads, config_.head_dim(), ctx);
  round_activations(ctx, rows * h);
  linear(layer.o, ctx, rows, tmp);
  round_activations(tmp, rows * h);
  ops.add_layer_norm(x, tmp, rows, h, layer.attn_gamma, layer.attn_beta, config_.layer_norm_eps);
  round_activations(x, rows * h);
  linear(layer.ffn_in, x, rows, ffn);
  round_activations(ffn, rows * f);
  ops.activation(ffn_activation, ffn, rows * f);
  round_activations(ffn, rows * f);
  linear(layer.ffn_out, ffn, rows, tmp);
  round_activations(tmp, rows * h);
  ops.add_layer_norm(x, tmp, rows, h, layer.ffn_gamma, layer.ffn_beta, config_.layer_norm_eps);
  round_activations(x, rows * h);
}

void EncoderClassifier::embed(const int32_t* ids, int64_t seq, float* x) const {
  check_ids(ids, 1, seq);
  const PassBuffers b = pass_buffers(1, seq);
  ops_->copy_in(ids, b.ids.slice(0, seq));
  embed_pass(b.ids.slice(0, seq), seq, seq, b.x);
  ops_->copy_out(b.x.slice(0, seq * config_.hidden_size), x);
}

void EncoderClassifier::forward_block(int64_t i, float* x, int64_t seq) const {
  if (i < 0 || i >= num_blocks()) fail("forward_block: block {} of {}", i, num_blocks());
  if (seq <= 0 || seq > config_.max_positions)
    fail("forward_block: sequence length {}, expected 1 to {}", seq, config_.max_positions);
  const PassBuffers b = pass_buffers(1, seq);
  const std::vector<int32_t> ones(static_cast<std::size_t>(seq), 1);
  ops_->copy_in(ones.data(), b.mask.slice(0, seq));
  ops_->copy_in(x, b.x.slice(0, seq * config_.hidden_size));
  block_pass(layers_[static_cast<std::size_t>(i)], b, b.mask.slice(0, seq), 1, seq);
  ops_->copy_out(b.x.slice(0, seq * config_.hidden_size), x);
}

std::vector<LinearReport> EncoderClassifier::linear_reports() const {
  std::vector<LinearReport> out;
  for (const auto& [name, linear, fused] : all_linears_) {
    out.push_back({name, linear->format(), linear->kernel_path(), linear->bytes_held(),
                   static_cast<std::size_t>(linear->out_features() * (linear->in_features() + 1)) * sizeof(float)});
  }
  return out;
}

std::map<std::string, int> EncoderClassifier::kernel_path_counts() const {
  std::map<std::string, int> counts;
  for (const auto& [name, linear, fused] : all_linears_)
    ++counts[linear->format() + " " + linear->kernel_path() + (fused ? kFusedQkvMark : "")];
  return counts;
}

std::size_t EncoderClassifier::fp32_bytes() const {
  std::size_t total = bytes_held();
  for (const auto& r : linear_reports()) total = total - r.bytes_held + r.fp32_bytes;
  return total;
}

std::size_t EncoderClassifier::bytes_held() const {
  std::size_t total = word_embeddings_.bytes() + position_embeddings_.bytes() + token_type0_.bytes() +
                      embedding_gamma_.bytes() + embedding_beta_.bytes();
  for (const Layer& l : layers_)
    total += l.attn_gamma.bytes() + l.attn_beta.bytes() + l.ffn_gamma.bytes() + l.ffn_beta.bytes();
  for (const auto& nl : all_linears_) total += nl.linear->bytes_held();
  return total;
}

EncoderClassifier load_encoder_classifier(const std::filesystem::path& dir, const LinearFactory& factory) {
  const auto checkpoint = io::Checkpoint::open(dir);
  const auto config = load_encoder_config(dir, checkpoint);
  return EncoderClassifier(load_encoder_params(checkpoint, config), factory);
}

}  // namespace qjoule::model

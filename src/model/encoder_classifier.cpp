#include "qjoule/model/encoder_classifier.h"

#include <algorithm>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/encoder_ops.h"

namespace qjoule::model {

LinearFactory fp32_linear_factory() {
  return [](const LinearParams& p, bool /*in_block*/) {
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

void EncoderClassifier::round_activations(float* x, int64_t n) const {
  if (activations_ == ActivationDtype::bf16) kernels::round_to_bf16_f32(x, n);
}

EncoderClassifier::EncoderClassifier(EncoderParams params, const LinearFactory& factory, ActivationDtype activations)
    : config_(std::move(params.config)),
      activations_(activations),
      word_embeddings_(std::move(params.word_embeddings)),
      position_embeddings_(std::move(params.position_embeddings)),
      token_type_embeddings_(std::move(params.token_type_embeddings)),
      embedding_norm_(std::move(params.embedding_norm)) {
  auto build = [&](LinearParams& p, bool in_block) {
    auto linear = factory(p, in_block);
    all_linears_.push_back({p.name, linear.get()});
    p.weight = {};  // the Linear holds its own copy in its own format
    p.bias = {};
    return linear;
  };
  for (auto& lp : params.layers) {
    Layer layer;
    layer.q = build(lp.q, true);
    layer.k = build(lp.k, true);
    layer.v = build(lp.v, true);
    layer.o = build(lp.o, true);
    layer.ffn_in = build(lp.ffn_in, true);
    layer.ffn_out = build(lp.ffn_out, true);
    layer.attn_norm = std::move(lp.attn_norm);
    layer.ffn_norm = std::move(lp.ffn_norm);
    layers_.push_back(std::move(layer));
  }
  head_dense_ = build(params.head_dense, false);
  classifier_ = build(params.classifier, false);
}

void EncoderClassifier::forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq,
                                float* logits) const {
  const int64_t h = config_.hidden_size;
  const int64_t rows = batch * seq;
  if (batch <= 0 || seq <= 0) fail("forward: batch {} × sequence {} is empty", batch, seq);
  if (seq > config_.max_positions)
    fail("forward: sequence length {} exceeds max_position_embeddings {}", seq, config_.max_positions);
  for (int64_t i = 0; i < rows; ++i) {
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      fail("forward: token id {} at batch row {}, position {} is outside the vocabulary [0, {})", ids[i], i / seq,
           i % seq, config_.vocab_size);
  }

  // Embeddings: word + position (+ token type 0 for BERT), then LayerNorm.
  std::vector<float> x(static_cast<size_t>(rows * h));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* w = word_embeddings_.data() + static_cast<int64_t>(ids[i]) * h;
    const float* p = position_embeddings_.data() + (i % seq) * h;
    float* out = x.data() + i * h;
    for (int64_t c = 0; c < h; ++c) out[c] = w[c] + p[c];
    if (!token_type_embeddings_.empty()) {
      for (int64_t c = 0; c < h; ++c) out[c] += token_type_embeddings_[static_cast<size_t>(c)];
    }
  }
  kernels::add_layer_norm_f32(x.data(), nullptr, rows, h, embedding_norm_.gamma.data(), embedding_norm_.beta.data(),
                              config_.layer_norm_eps);
  round_activations(x.data(), rows * h);

  const int64_t f = config_.intermediate_size;
  std::vector<float> q(x.size()), k(x.size()), v(x.size()), ctx(x.size()), tmp(x.size());
  std::vector<float> ffn(static_cast<size_t>(rows * f));
  for (const Layer& layer : layers_) {
    layer.q->forward(x.data(), rows, q.data());
    layer.k->forward(x.data(), rows, k.data());
    layer.v->forward(x.data(), rows, v.data());
    round_activations(q.data(), rows * h);
    round_activations(k.data(), rows * h);
    round_activations(v.data(), rows * h);
    kernels::attention_f32(q.data(), k.data(), v.data(), h, mask, batch, seq, config_.num_heads, config_.head_dim(),
                           ctx.data());
    round_activations(ctx.data(), rows * h);
    layer.o->forward(ctx.data(), rows, tmp.data());
    round_activations(tmp.data(), rows * h);
    kernels::add_layer_norm_f32(x.data(), tmp.data(), rows, h, layer.attn_norm.gamma.data(),
                                layer.attn_norm.beta.data(), config_.layer_norm_eps);
    round_activations(x.data(), rows * h);
    layer.ffn_in->forward(x.data(), rows, ffn.data());
    round_activations(ffn.data(), rows * f);
    if (config_.activation == "relu") {
      kernels::relu_f32(ffn.data(), rows * f);
    } else {
      kernels::gelu_erf_f32(ffn.data(), rows * f);
    }
    round_activations(ffn.data(), rows * f);
    layer.ffn_out->forward(ffn.data(), rows, tmp.data());
    round_activations(tmp.data(), rows * h);
    kernels::add_layer_norm_f32(x.data(), tmp.data(), rows, h, layer.ffn_norm.gamma.data(),
                                layer.ffn_norm.beta.data(), config_.layer_norm_eps);
    round_activations(x.data(), rows * h);
  }

  // Head on the first ([CLS]) token of each sequence.
  std::vector<float> cls(static_cast<size_t>(batch * h)), pooled(static_cast<size_t>(batch * h));
  for (int64_t b = 0; b < batch; ++b) std::copy_n(x.data() + b * seq * h, h, cls.data() + b * h);
  head_dense_->forward(cls.data(), batch, pooled.data());
  round_activations(pooled.data(), batch * h);
  if (config_.arch == EncoderArch::Bert) {
    kernels::tanh_f32(pooled.data(), batch * h);
  } else {
    kernels::relu_f32(pooled.data(), batch * h);
  }
  round_activations(pooled.data(), batch * h);
  classifier_->forward(pooled.data(), batch, logits);
}

std::vector<LinearReport> EncoderClassifier::linear_reports() const {
  std::vector<LinearReport> out;
  for (const auto& [name, linear] : all_linears_) {
    out.push_back({name, linear->format(), linear->kernel_path(), linear->bytes_held(),
                   static_cast<std::size_t>(linear->out_features() * (linear->in_features() + 1)) * sizeof(float)});
  }
  return out;
}

std::map<std::string, int> EncoderClassifier::kernel_path_counts() const {
  std::map<std::string, int> counts;
  for (const auto& [name, linear] : all_linears_) ++counts[linear->format() + " " + linear->kernel_path()];
  return counts;
}

std::size_t EncoderClassifier::fp32_bytes() const {
  std::size_t total = bytes_held();
  for (const auto& r : linear_reports()) total = total - r.bytes_held + r.fp32_bytes;
  return total;
}

std::size_t EncoderClassifier::bytes_held() const {
  std::size_t total = (word_embeddings_.size() + position_embeddings_.size() + token_type_embeddings_.size() +
                       embedding_norm_.gamma.size() + embedding_norm_.beta.size()) *
                      sizeof(float);
  for (const Layer& l : layers_) {
    total += (l.attn_norm.gamma.size() + l.attn_norm.beta.size() + l.ffn_norm.gamma.size() + l.ffn_norm.beta.size()) *
             sizeof(float);
  }
  for (const auto& nl : all_linears_) total += nl.linear->bytes_held();
  return total;
}

EncoderClassifier load_encoder_classifier(const std::filesystem::path& dir, const LinearFactory& factory) {
  const auto checkpoint = io::Checkpoint::open(dir);
  const auto config = load_encoder_config(dir, checkpoint);
  return EncoderClassifier(load_encoder_params(checkpoint, config), factory);
}

}  // namespace qjoule::model

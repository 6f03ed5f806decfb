#include "qjoule/model/encoder_classifier.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "qjoule/error.h"
#include "qjoule/io/safetensors.h"
#include "qjoule/kernels/encoder_ops.h"

namespace qjoule::model {
namespace {

// "a.b.q_lin", "a.b.k_lin", "a.b.v_lin" -> "a.b.q_lin+k_lin+v_lin".
std::string fused_name(const std::vector<std::string>& names) {
  const auto dot = names.front().rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : names.front().substr(0, dot + 1);
  std::string out = names.front();
  for (size_t i = 1; i < names.size(); ++i)
    out += "+" + (names[i].starts_with(prefix) ? names[i].substr(prefix.size()) : names[i]);
  return out;
}

// Q, K and V as one Linear: weight rows [q; k; v], biases likewise (zeros for a part without one).
LinearParams fused_qkv_params(const LinearParams& q, const LinearParams& k, const LinearParams& v) {
  LinearParams f;
  f.in_features = q.in_features;
  const bool any_bias = !q.bias.empty() || !k.bias.empty() || !v.bias.empty();
  for (const LinearParams* p : {&q, &k, &v}) {
    if (p->in_features != q.in_features)
      fail("{}: {} inputs where {} has {}; Q, K and V must read the same input", p->name, p->in_features, q.name,
           q.in_features);
    f.out_features += p->out_features;
    f.weight.insert(f.weight.end(), p->weight.begin(), p->weight.end());
    if (any_bias) {
      if (p->bias.empty()) {
        f.bias.insert(f.bias.end(), static_cast<size_t>(p->out_features), 0.0f);
      } else {
        f.bias.insert(f.bias.end(), p->bias.begin(), p->bias.end());
      }
    }
    f.fused_from.push_back(p->name);
  }
  f.name = fused_name(f.fused_from);
  return f;
}

}  // namespace

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
    if (!linear) fail("{}: the Linear factory built nothing", p.name);
    all_linears_.push_back({p.name, linear.get()});
    free_weights(p);  // the Linear holds its own copy in its own format
    return linear;
  };
  for (auto& lp : params.layers) {
    Layer layer;
    if (lp.q.out_features == config_.hidden_size && lp.k.out_features == config_.hidden_size &&
        lp.v.out_features == config_.hidden_size) {
      const LinearParams fused = fused_qkv_params(lp.q, lp.k, lp.v);
      layer.qkv = factory(fused, true);
      if (layer.qkv) {
        all_linears_.push_back({fused.name, layer.qkv.get(), true});
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

  // Activations, every one written before it is read: one uninitialized block (a vector's zeroing
  // would be a pass over ~30 MB per DistilBERT-base batch of 8 × 128). Q, K and V are one [rows, 3h]
  // tensor from a fused Linear, or its three [rows, h] thirds.
  const int64_t f = config_.intermediate_size;
  const auto block = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(rows * (6 * h + f)));
  float* const x = block.get();
  float* const qkv = x + rows * h;
  float* const ctx = qkv + 3 * rows * h;
  float* const tmp = ctx + rows * h;
  float* const ffn = tmp + rows * h;

  // Embeddings: word + position (+ token type 0 for BERT), then LayerNorm.
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* w = word_embeddings_.data() + static_cast<int64_t>(ids[i]) * h;
    const float* p = position_embeddings_.data() + (i % seq) * h;
    float* out = x + i * h;
    for (int64_t c = 0; c < h; ++c) out[c] = w[c] + p[c];
    if (!token_type_embeddings_.empty()) {
      for (int64_t c = 0; c < h; ++c) out[c] += token_type_embeddings_[static_cast<size_t>(c)];
    }
  }
  kernels::add_layer_norm_f32(x, nullptr, rows, h, embedding_norm_.gamma.data(), embedding_norm_.beta.data(),
                              config_.layer_norm_eps);
  round_activations(x, rows * h);

  for (const Layer& layer : layers_) {
    const float *q = qkv, *k = nullptr, *v = nullptr;
    int64_t stride = h;
    if (layer.qkv) {
      layer.qkv->forward(x, rows, qkv);
      k = q + h;
      v = q + 2 * h;
      stride = 3 * h;
    } else {
      layer.q->forward(x, rows, qkv);
      layer.k->forward(x, rows, qkv + rows * h);
      layer.v->forward(x, rows, qkv + 2 * rows * h);
      k = q + rows * h;
      v = q + 2 * rows * h;
    }
    round_activations(qkv, 3 * rows * h);
    kernels::attention_f32(q, k, v, stride, mask, batch, seq, config_.num_heads, config_.head_dim(), ctx);
    round_activations(ctx, rows * h);
    layer.o->forward(ctx, rows, tmp);
    round_activations(tmp, rows * h);
    kernels::add_layer_norm_f32(x, tmp, rows, h, layer.attn_norm.gamma.data(), layer.attn_norm.beta.data(),
                                config_.layer_norm_eps);
    round_activations(x, rows * h);
    layer.ffn_in->forward(x, rows, ffn);
    round_activations(ffn, rows * f);
    if (config_.activation == "relu") {
      kernels::relu_f32(ffn, rows * f);
    } else {
      kernels::gelu_erf_f32(ffn, rows * f);
    }
    round_activations(ffn, rows * f);
    layer.ffn_out->forward(ffn, rows, tmp);
    round_activations(tmp, rows * h);
    kernels::add_layer_norm_f32(x, tmp, rows, h, layer.ffn_norm.gamma.data(), layer.ffn_norm.beta.data(),
                                config_.layer_norm_eps);
    round_activations(x, rows * h);
  }

  // Head on the first ([CLS]) token of each sequence.
  std::vector<float> cls(static_cast<size_t>(batch * h)), pooled(static_cast<size_t>(batch * h));
  for (int64_t b = 0; b < batch; ++b) std::copy_n(x + b * seq * h, h, cls.data() + b * h);
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

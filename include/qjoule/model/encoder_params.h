// The FP32 parameters of an encoder classifier, read from a checkpoint and checked against the
// config, before any quantization. Transforms that need the raw weights (SmoothQuant) work here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/encoder_config.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"
#include "qjoule/quant/format_spec.h"

namespace qjoule::kernels {
class Linear;
}

namespace qjoule::model {

struct LinearParams {
  std::string name;  // Hugging Face module name, e.g. "distilbert.transformer.layer.0.attention.q_lin"
  int64_t out_features = 0;
  int64_t in_features = 0;
  std::vector<float> weight;  // [out, in] row-major
  std::vector<float> bias;    // [out]
  bool has_bias = false;      // set with weights not loaded yet (deferred): whether a bias will come
  // Empty for a Linear of the checkpoint. Set when the model asks for one Linear standing for several
  // that read the same input (Q, K and V): their names, in the order their rows are concatenated.
  std::vector<std::string> fused_from;
  // A Linear of a pre-quantized checkpoint (model/prequantized/prequantized_linear.h): builds it from the
  // checkpoint's codes, `weight` staying empty; it runs as `prequantized_spec` (int4:g=128:asym,
  // ...), and `prequantized_from` says what the checkpoint holds (gptq 4-bit, group_size 128, ...).
  std::function<std::unique_ptr<kernels::Linear>()> build_prequantized;
  quant::FormatSpec prequantized_spec;
  std::string prequantized_from;
  // A language model's head: the format its checkpoint stores it in (bf16, fp16 or fp32), which it is held
  // in by default below FP32 (quant::LayerPolicy::resolve's head_stored); nullopt for every other Linear.
  std::optional<quant::Format> head_stored;
};

// Whether p has a bias: loaded, or to come (deferred weights).
inline bool with_bias(const LinearParams& p) { return p.has_bias || !p.bias.empty(); }

// Frees p's weight and bias, memory included (`p.weight = {}` would keep the capacity: it is the
// initializer-list assignment, which clears without freeing).
inline void free_weights(LinearParams& p) {
  std::vector<float>().swap(p.weight);
  std::vector<float>().swap(p.bias);
}

// The LinearParams of pre-quantized Linear `name` of [out, in], checked now (check_prequantized_linear) and
// built from its codes each time a model asks (load_prequantized_linear), from `checkpoint`, which the
// builder keeps open (parameters outlive the reader that made them: a bench builds a model per run);
// `bias_expected`: one line when the model's config gives it a bias and the checkpoint has none.
LinearParams prequantized_linear_params(std::shared_ptr<const io::Checkpoint> checkpoint,
                                        const CheckpointQuantization& quantization, const std::string& name,
                                        int64_t out, int64_t in, bool bias_expected);

struct LayerNormParams {
  std::string name;
  std::vector<float> gamma, beta;
};

// Both BERT and DistilBERT blocks are post-LayerNorm:
//   x = attn_norm(x + o(attention(q(x), k(x), v(x)))),  x = ffn_norm(x + ffn_out(act(ffn_in(x)))).
struct EncoderLayerParams {
  LinearParams q, k, v, o, ffn_in, ffn_out;
  LayerNormParams attn_norm, ffn_norm;
};

struct EncoderParams {
  EncoderConfig config;
  std::vector<float> word_embeddings;        // [vocab, hidden]
  std::vector<float> position_embeddings;    // [positions, hidden]
  std::vector<float> token_type_embeddings;  // [types, hidden] (BERT), empty for DistilBERT
  LayerNormParams embedding_norm;
  std::vector<EncoderLayerParams> layers;
  LinearParams head_dense;  // BERT pooler.dense (tanh) or DistilBERT pre_classifier (ReLU)
  LinearParams classifier;  // [num_labels, hidden]
};

// Reads every parameter as FP32 and checks each shape against the config; a missing tensor or a
// shape that disagrees is an error naming the tensor, its shape and the expected one.
EncoderParams load_encoder_params(const io::Checkpoint& checkpoint, const EncoderConfig& config);

}  // namespace qjoule::model

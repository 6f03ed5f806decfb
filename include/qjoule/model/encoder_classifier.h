// A BERT or DistilBERT sequence classifier ready to run on the CPU: embeddings, post-LN
// transformer blocks (multi-head attention with the padding mask, GELU FFN), and the head
// (BERT: tanh pooler; DistilBERT: ReLU pre_classifier), then the classifier.
// Each Linear is built by a factory, so the same model runs FP32 or any quantized format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/kernels/linear.h"
#include "qjoule/model/encoder_params.h"

namespace qjoule::model {

// Builds the Linear for one layer; `in_block` is true for the Linears inside transformer blocks
// (Q, K, V, attention output, FFN in/out) and false for the head.
// EncoderClassifier first offers each block's Q, K and V as one fused LinearParams (weights and biases
// concatenated [q; k; v], `fused_from` naming the three): the factory builds it when the three would
// get the same format and kernel — one activation pass and one GEMM instead of three — or returns
// nullptr, and the model then asks for the three separately. Only fused params may get nullptr.
using LinearFactory = std::function<std::unique_ptr<kernels::Linear>(const LinearParams& params, bool in_block)>;

// The default factory: FP32 on oneDNN for every layer (fused Q, K, V included).
LinearFactory fp32_linear_factory();

// One row per Linear that runs: what ran and what it holds. Fused Q, K and V are one row whose name
// joins the three, e.g. "distilbert.transformer.layer.0.attention.q_lin+k_lin+v_lin".
struct LinearReport {
  std::string name;
  std::string format;
  std::string kernel_path;
  std::size_t bytes_held = 0;
  std::size_t fp32_bytes = 0;
};

// Precision of the activations between operations (`--act-dtype`). With bf16, every activation
// tensor an operation hands on (Linear outputs, attention context, LayerNorm, GELU, head) is rounded
// to BF16, and the non-GEMM operations compute in FP32 inside, as BF16 LayerNorm/softmax/GELU do.
// No x86 instruction set here does that arithmetic natively, so the rounding is done in place on
// FP32 buffers: the numbers are a BF16 pipeline's, the speed is not (see activation_path()).
enum class ActivationDtype { f32, bf16 };
ActivationDtype parse_activation_dtype(const std::string& text);  // "f32"/"fp32" or "bf16", else an error
std::string to_string(ActivationDtype dtype);

class EncoderClassifier {
 public:
  EncoderClassifier(EncoderParams params, const LinearFactory& factory,
                    ActivationDtype activations = ActivationDtype::f32);

  // ids, mask: [batch, seq] row-major (mask 1 = token, 0 = padding); logits: [batch, num_labels].
  // seq must not exceed max_position_embeddings and every id must be < vocab_size (else an error).
  void forward(const int32_t* ids, const int32_t* mask, int64_t batch, int64_t seq, float* logits) const;

  const EncoderConfig& config() const { return config_; }
  ActivationDtype activation_dtype() const { return activations_; }
  // How the non-GEMM operations ran: "f32" or "bf16 (emulated: ...)".
  std::string activation_path() const;
  // False when part of the run is emulated (bf16 activations), so its speed must not be reported
  // as that of a native pipeline.
  bool speed_representative() const { return activations_ == ActivationDtype::f32; }
  std::vector<LinearReport> linear_reports() const;
  // "format kernel_path" -> how many Linears ran it: what every result prints as the kernels that ran.
  // Fused Q, K, V Linears are counted apart, their key ending in kFusedQkvMark: DistilBERT-base in int8
  // gives {"int8 onednn:...:u8s8s32", 18}, {"int8 onednn:...:u8s8s32 [q+k+v fused]", 6} (6 blocks × 3
  // of its 36 Linears) and the FP32 head's {"fp32 ...", 2}.
  std::map<std::string, int> kernel_path_counts() const;
  static constexpr const char* kFusedQkvMark = " [q+k+v fused]";
  // Bytes held in memory: every Linear as packed + embeddings, norms and other FP32 tensors.
  std::size_t bytes_held() const;
  std::size_t fp32_bytes() const;  // the same model held entirely in FP32

 private:
  struct Layer {
    std::unique_ptr<kernels::Linear> qkv;      // Q, K and V as one Linear [3·hidden], when fused
    std::unique_ptr<kernels::Linear> q, k, v;  // otherwise
    std::unique_ptr<kernels::Linear> o, ffn_in, ffn_out;
    LayerNormParams attn_norm, ffn_norm;
  };
  struct NamedLinear {
    std::string name;
    const kernels::Linear* linear;
    bool fused_qkv = false;
  };

  void round_activations(float* x, int64_t n) const;

  EncoderConfig config_;
  ActivationDtype activations_ = ActivationDtype::f32;
  std::vector<float> word_embeddings_, position_embeddings_, token_type_embeddings_;
  LayerNormParams embedding_norm_;
  std::vector<Layer> layers_;
  std::unique_ptr<kernels::Linear> head_dense_, classifier_;
  std::vector<NamedLinear> all_linears_;
};

// Loads `dir` (config.json + safetensors) into an EncoderClassifier.
EncoderClassifier load_encoder_classifier(const std::filesystem::path& dir,
                                          const LinearFactory& factory = fp32_linear_factory());

}  // namespace qjoule::model

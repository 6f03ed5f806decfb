// A decoder language model (Llama / Qwen2 / GPT-2) ready to run on the CPU: token (and, for GPT-2,
// position) embeddings, pre-norm transformer blocks with causal grouped-query attention over a KV
// cache, the final norm and lm_head. Each Linear is built by a factory, so the same model runs FP32
// or any quantized format; embeddings, norms and lm_head stay FP32 unless the policy names them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "qjoule/kernels/decoder_ops.h"
#include "qjoule/kernels/linear.h"
#include "qjoule/model/decoder_params.h"
#include "qjoule/model/encoder_classifier.h"

namespace qjoule::model {

// Keys and values of every layer for the tokens seen so far, FP32, [capacity, kv_dim] per layer.
class KvCache {
 public:
  KvCache() = default;
  KvCache(int64_t layers, int64_t capacity, int64_t kv_dim);
  int64_t size() const { return size_; }  // tokens held
  int64_t capacity() const { return capacity_; }
  void clear() { size_ = 0; }
  // Forgets every token after the first `tokens` (e.g. back to the prompt, to decode again).
  void truncate(int64_t tokens);
  std::size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

 private:
  friend class DecoderLM;
  int64_t layers_ = 0, capacity_ = 0, kv_dim_ = 0, size_ = 0;
  std::vector<float> k_, v_;  // [layers, capacity, kv_dim]
};

class DecoderLM {
 public:
  DecoderLM(DecoderParams params, const LinearFactory& factory);

  // A cache for up to `capacity` tokens (0: max_position_embeddings); more than the model's positions
  // is an error naming both numbers.
  KvCache make_cache(int64_t capacity = 0) const;

  // Runs the n tokens `ids` at positions cache.size() .. cache.size() + n − 1 (a prefill when the cache
  // is empty, a decode step when n = 1), appends their keys and values to the cache and writes the
  // logits of tokens logits_from .. n − 1: [n − logits_from, vocab] (n − 1: the last token's only).
  // A position beyond the cache or max_position_embeddings, or an id outside the vocabulary, is an error.
  void forward(const int32_t* ids, int64_t n, KvCache& cache, float* logits, int64_t logits_from = 0) const;

  const DecoderConfig& config() const { return config_; }
  std::vector<LinearReport> linear_reports() const;
  std::map<std::string, int> kernel_path_counts() const;  // "format kernel_path" -> Linears that ran it
  std::size_t bytes_held() const;                         // every Linear as packed + embeddings and norms (FP32)
  std::size_t fp32_bytes() const;                         // the same model held entirely in FP32

 private:
  struct Layer {
    std::unique_ptr<kernels::Linear> qkv, q, k, v, o, gate, up, down;
    LayerNormParams attn_norm, mlp_norm;
  };
  void norm(const LayerNormParams& p, const float* x, int64_t rows, float* out) const;
  void attention_block(const Layer& layer, int64_t index, float* x, int64_t n, KvCache& cache) const;
  void mlp_block(const Layer& layer, float* x, int64_t n) const;

  DecoderConfig config_;
  std::vector<float> token_embeddings_, position_embeddings_;
  std::vector<Layer> layers_;
  LayerNormParams final_norm_;
  std::unique_ptr<kernels::Linear> lm_head_;
  kernels::RopeTable rope_;
  struct NamedLinear {
    std::string name;
    const kernels::Linear* linear;
    std::size_t fp32_bytes;  // weight + bias as FP32
  };
  std::vector<NamedLinear> all_linears_;
};

// Loads `dir` (config.json + safetensors) into a DecoderLM. `unused_tensors` (when not null) receives
// unused_tensors_warning(): "" when the model read every tensor it should.
DecoderLM load_decoder_lm(const std::filesystem::path& dir, const LinearFactory& factory = fp32_linear_factory(),
                          std::string* unused_tensors = nullptr);

// The FP32 model of `dir` holding no Linear weights: each Linear reads its weights from the checkpoint
// at every forward (model/streamed_linear_f32.h), so the model holds its embeddings, norms and one
// layer's FP32 weights at a time. Outputs equal load_decoder_lm's FP32 ones; forwards are slower. For
// reference outputs of models whose FP32 weights would not fit beside the quantized one.
DecoderLM load_decoder_lm_streamed(const std::filesystem::path& dir);

}  // namespace qjoule::model

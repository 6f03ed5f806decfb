// Hugging Face config.json for encoder sequence classifiers (BERT and DistilBERT), reconciled with
// the checkpoint's tensor shapes: fields missing from config.json are inferred from the tensors, and a
// field that disagrees with them is an error naming both values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qjoule/io/safetensors.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"

namespace qjoule::model {

enum class EncoderArch { Bert, DistilBert };

struct EncoderConfig {
  EncoderArch arch = EncoderArch::DistilBert;
  std::string model_type;    // "bert" | "distilbert"
  std::string architecture;  // "BertForSequenceClassification" | "DistilBertForSequenceClassification"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;  // BERT only
  int64_t num_labels = 0;
  float layer_norm_eps = 1e-12f;
  std::string activation = "gelu";  // "gelu" (erf form) or "relu"
  int64_t pad_token_id = 0;
  std::vector<std::string> id2label;
  std::vector<std::string> inferred_fields;  // fields that came from tensor shapes, not config.json
  // A pre-quantized checkpoint's method and layout (GPTQ, AWQ, bitsandbytes NF4): its packed Linears are
  // read from their codes (model/prequantized/prequantized_linear.h); nullopt for an unquantized checkpoint.
  std::optional<CheckpointQuantization> quantization;

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Tensor-name prefix of the encoder body: "bert." or "distilbert.".
  std::string prefix() const;
};

// Supported architectures, for messages and --help.
std::string supported_architectures();

// Reads `dir`/config.json and reconciles it with `checkpoint`.
EncoderConfig load_encoder_config(const std::filesystem::path& dir, const io::Checkpoint& checkpoint);

}  // namespace qjoule::model

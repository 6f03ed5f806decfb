#include "qjoule/model/encoder_config.h"

#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config_reconciler.h"
#include "qjoule/error.h"
#include "qjoule/model/prequantized/checkpoint_quantization.h"

namespace qjoule::model {
namespace {

using json = nlohmann::json;

struct FieldNames {
  const char* vocab = "vocab_size";
  const char* hidden;
  const char* layers;
  const char* heads;
  const char* intermediate;
  const char* activation;
};

constexpr FieldNames kBertFields{"vocab_size",          "hidden_size",       "num_hidden_layers",
                                 "num_attention_heads", "intermediate_size", "hidden_act"};
constexpr FieldNames kDistilBertFields{"vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "activation"};

std::vector<std::string> read_id2label(const std::string& path, const json& config) {
  std::vector<std::string> labels;
  if (!config.contains("id2label") || config.at("id2label").is_null()) return labels;
  const json& id2label = config.at("id2label");
  if (!id2label.is_object())
    fail("{}: 'id2label' is {}, expected an object like {{\"0\": \"NEGATIVE\"}}", path, id2label.dump());
  labels.resize(id2label.size());
  for (const auto& [key, value] : id2label.items()) {
    std::size_t index = 0;
    try {
      index = std::stoul(key);
    } catch (const std::exception&) {
      fail("{}: id2label key '{}' is not a label index", path, key);
    }
    if (index >= labels.size())
      fail("{}: id2label has {} entries but a key {}; expected keys 0..{}", path, labels.size(), index,
           labels.size() - 1);
    labels[index] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return labels;
}

}  // namespace

std::string EncoderConfig::prefix() const { return arch == EncoderArch::Bert ? "bert." : "distilbert."; }

std::string supported_architectures() {
  return "bert (BertForSequenceClassification), distilbert (DistilBertForSequenceClassification)";
}

EncoderConfig load_encoder_config(const std::filesystem::path& dir, const io::Checkpoint& ck) {
  const auto path = dir / "config.json";
  const json config = read_config_json(dir);
  // Before any shape is read from its tensors: a pre-quantized checkpoint's shapes are its packed tensors'.
  EncoderConfig out;
  out.quantization =
      readable_checkpoint_quantization(dir, config, ck, /*reads_prequantized=*/true, "encoder classifier");
  out.model_type = string_field(config, "model_type", "", path.string() + ": ");
  std::string architectures = "none";
  if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty()) {
    out.architecture = config["architectures"][0].is_string() ? config["architectures"][0].get<std::string>() : "";
    architectures = config["architectures"].dump();
  }
  if (out.model_type == "bert" && (out.architecture.empty() || out.architecture == "BertForSequenceClassification")) {
    out.arch = EncoderArch::Bert;
    out.architecture = "BertForSequenceClassification";
  } else if (out.model_type == "distilbert" &&
             (out.architecture.empty() || out.architecture == "DistilBertForSequenceClassification")) {
    out.arch = EncoderArch::DistilBert;
    out.architecture = "DistilBertForSequenceClassification";
  } else {
    fail("{}: model_type '{}' with architectures {} is not supported; supported: {}", path.string(), out.model_type,
         architectures, supported_architectures());
  }

  const bool bert = out.arch == EncoderArch::Bert;
  const FieldNames& f = bert ? kBertFields : kDistilBertFields;
  const std::string p = out.prefix();
  const std::string layer0 = bert ? p + "encoder.layer.0." : p + "transformer.layer.0.";
  ConfigReconciler r(path, config, ck, out.inferred_fields);

  out.vocab_size = r.reconcile(f.vocab, p + "embeddings.word_embeddings.weight", 0);
  out.hidden_size = r.reconcile(f.hidden, p + "embeddings.word_embeddings.weight", 1);
  out.max_positions = r.reconcile("max_position_embeddings", p + "embeddings.position_embeddings.weight", 0);
  const std::string ffn_in = layer0 + (bert ? "intermediate.dense" : "ffn.lin1");
  out.intermediate_size =
      out.quantization && is_prequantized_linear(ck, ffn_in)
          ? r.reconcile_value(f.intermediate, prequantized_linear_dims(ck, *out.quantization, ffn_in).first,
                              "the packed tensors of '" + ffn_in + "'")
          : r.reconcile(f.intermediate, ffn_in + ".weight", 0);
  if (bert) out.type_vocab_size = r.reconcile("type_vocab_size", p + "embeddings.token_type_embeddings.weight", 0);

  const int64_t layers_in_checkpoint = count_layers(ck, bert ? p + "encoder.layer." : p + "transformer.layer.");
  if (auto layers = r.int_field(f.layers)) {
    if (*layers != layers_in_checkpoint)
      fail("{}: {} = {}, but the checkpoint holds tensors for {} layers", path.string(), f.layers, *layers,
           layers_in_checkpoint);
    out.num_layers = *layers;
  } else {
    out.num_layers = layers_in_checkpoint;
    out.inferred_fields.push_back(f.layers);
  }
  if (out.num_layers == 0)
    fail("{}: the checkpoint holds no transformer layers (no '{}*' tensors)", path.string(), layer0);

  // Heads cannot be read off tensor shapes; Hugging Face's default for both classes is 12.
  if (auto heads = r.int_field(f.heads)) {
    out.num_heads = *heads;
  } else {
    out.num_heads = 12;
    out.inferred_fields.push_back(std::string(f.heads) + " (Hugging Face default 12)");
  }
  if (out.num_heads <= 0 || out.hidden_size % out.num_heads != 0)
    fail("{}: {} = {} does not divide the hidden size {}", path.string(), f.heads, out.num_heads, out.hidden_size);

  out.id2label = read_id2label(path.string(), config);
  const auto& classifier = r.tensor("classifier.weight");
  const int64_t labels_in_checkpoint = classifier.shape.empty() ? 0 : classifier.shape[0];
  int64_t labels = 0;
  std::string labels_source;
  if (!out.id2label.empty()) {
    labels = static_cast<int64_t>(out.id2label.size());
    labels_source = fmt::format("id2label has {} entries", labels);
  } else if (auto n = r.int_field("num_labels")) {
    labels = *n;
    labels_source = fmt::format("num_labels = {}", labels);
  }
  if (labels == 0) {
    out.num_labels = labels_in_checkpoint;
    out.inferred_fields.push_back("num_labels");
  } else if (labels != labels_in_checkpoint) {
    fail("{}: {}, but tensor 'classifier.weight' has shape {} (so {} labels)", path.string(), labels_source,
         classifier.shape_string(), labels_in_checkpoint);
  } else {
    out.num_labels = labels;
  }
  if (out.id2label.empty()) {
    for (int64_t i = 0; i < out.num_labels; ++i) out.id2label.push_back(fmt::format("LABEL_{}", i));
  }

  const std::string act = string_field(config, f.activation, "gelu", path.string() + ": ");
  if (act != "gelu" && act != "relu")
    fail("{}: {} = '{}' is not supported; supported: gelu (erf form), relu", path.string(), f.activation, act);
  out.activation = act;
  out.layer_norm_eps = static_cast<float>(r.positive_number_field("layer_norm_eps", out.layer_norm_eps));
  if (config.contains("pad_token_id") && config["pad_token_id"].is_number_integer())
    out.pad_token_id = config["pad_token_id"].get<int64_t>();
  require_token_id_in_vocab(path, "pad_token_id", out.pad_token_id, out.vocab_size);
  if (!bert && bool_field(config, "sinusoidal_pos_embds", false, path.string() + ": "))
    fail("{}: sinusoidal_pos_embds = true is not supported; expected false (learned positions)", path.string());
  return out;
}

}  // namespace qjoule::model
